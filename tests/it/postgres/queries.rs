//! Every query of `sql/` runs on PostgreSQL: each is prepared (parsed, planned and typed by the
//! server) in a freshly migrated schema, as `store::postgres::queries` gives its text (the
//! override in `sql/postgres/` when there is one, row placeholders expanded as
//! `support::common::expand_rows` does, parameters as `$N`), and returns the columns its base
//! file returns on SQLite, as many and named alike (so an override that must spell a row's
//! select list out, `check_live_threads`, can't drift from the declaration). An override must
//! have a base file.

use threadbase::store::postgres::migrate::migrate;
use threadbase::store::postgres::queries::{self, QUERIES, SQLITE_ONLY};

use crate::support::common::expand_rows;
use crate::support::postgres::TestSchema;

#[test]
fn every_query_prepares_on_postgresql() {
    let Some(pg) = TestSchema::new("every_query_prepares_on_postgresql") else {
        return;
    };
    let mut client = pg.connect();
    pg.block_on(migrate(&mut client)).expect("migrate");
    let db = crate::support::common::temp_db();
    let store = threadbase::Store::open(&db.path).unwrap();
    let sqlite = store.read().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "sql").then(|| p.file_stem().unwrap().to_string_lossy().into())
        })
        .collect();
    files.sort();
    let (mut prepared, mut overridden, mut compared, mut failures) = (0, 0, 0, Vec::new());
    for name in &files {
        if SQLITE_ONLY.iter().any(|(n, _)| n == name) {
            continue;
        }
        // The text from the files, as the tests expand rows, must be what the store gives.
        let over = dir.join("postgres").join(format!("{name}.sql"));
        let source = std::fs::read_to_string(if over.exists() {
            overridden += 1;
            over
        } else {
            dir.join(format!("{name}.sql"))
        })
        .unwrap();
        let query = queries::find(name).unwrap_or_else(|| panic!("{name} is not listed"));
        let pg_text = query.postgres();
        assert_eq!(
            pg_text,
            threadbase::store::postgres::params::positional(&expand_rows(&source)),
            "{name}"
        );
        match pg.block_on(client.prepare(&pg_text.sql)) {
            Ok(stmt) => {
                prepared += 1;
                // It returns the columns its SQLite text returns (the base file's), in
                // number and by name: an override that spells its select list out, or one
                // whose FROM gives a declared expression another meaning, can't drift.
                let base = std::fs::read_to_string(dir.join(format!("{name}.sql"))).unwrap();
                match sqlite.sqlite().unwrap().prepare(&expand_rows(&base)) {
                    Err(e) => {
                        failures.push(format!("{name}: its base does not prepare on SQLite: {e}"))
                    }
                    Ok(lite) => {
                        let lite: Vec<String> =
                            lite.column_names().iter().map(|c| c.to_string()).collect();
                        let theirs: Vec<String> = stmt
                            .columns()
                            .iter()
                            .map(|c| c.name().to_string())
                            .collect();
                        if lite.len() != theirs.len() {
                            failures.push(format!(
                                "{name}: {} columns on PostgreSQL, {} on SQLite",
                                theirs.len(),
                                lite.len()
                            ));
                        } else {
                            for (l, t) in lite.iter().zip(&theirs) {
                                if !same_name(l, t) {
                                    failures.push(format!(
                                        "{name}: column {t:?} on PostgreSQL is {l:?} on SQLite"
                                    ));
                                }
                            }
                        }
                        compared += 1;
                    }
                }
            }
            Err(e) => {
                let why = e
                    .as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_else(|| e.to_string());
                failures.push(format!("{name}: {why}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures in {} queries: each must prepare on PostgreSQL and return, in number and by name, the columns its base returns on SQLite (add or fix sql/postgres/NAME.sql):\n  {}",
        failures.len(),
        files.len(),
        failures.join("\n  ")
    );
    assert_eq!(prepared + SQLITE_ONLY.len(), QUERIES.len());
    assert_eq!(
        compared, prepared,
        "a query's columns were not compared with SQLite's"
    );
    println!(
        "{prepared} queries prepared on PostgreSQL ({overridden} from sql/postgres/, {} portable); {} SQLite-only",
        prepared - overridden,
        SQLITE_ONLY.len()
    );
}

#[test]
fn every_override_has_its_base_query() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let orphans: Vec<String> = std::fs::read_dir(dir.join("postgres"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| !dir.join(f).is_file())
        .collect();
    assert!(
        orphans.is_empty(),
        "sql/postgres/ overrides without a sql/ query of the same name (renamed or removed?): {orphans:?}"
    );
    assert!(queries::orphan_overrides().is_empty());
    // And every override is listed with its query.
    for name in queries::OVERRIDES {
        assert!(
            queries::find(name).unwrap().override_text.is_some(),
            "{name}"
        );
    }
}

/// Whether a column is named alike on both: by its alias or its column (`t.path` is `path` on
/// both), or, for an expression without an alias, as each engine names one: SQLite by its
/// text, PostgreSQL by its outermost function or keyword (`count(*)` is `count`, `CASE …` is
/// `case`) or `?column?`. Any other pair is an override whose list drifted from its base's.
fn same_name(sqlite: &str, postgres: &str) -> bool {
    let expression = sqlite.contains('(') || sqlite.contains(' ');
    sqlite == postgres
        || (expression
            && (postgres == "?column?" || sqlite.to_lowercase().contains(&postgres.to_lowercase())))
}
