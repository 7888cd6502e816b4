//! The two schemas agree: a fresh SQLite file migrated through `migrations/` and a fresh
//! PostgreSQL schema migrated through `migrations_postgres/` have the same tables, columns
//! (normalized type, nullability, default or not, generated or not), primary keys, unique
//! constraints, foreign keys, indexes (name, table, columns, uniqueness, partial WHERE), views
//! (names and columns) and triggers (name and table). Each is written as one line of text per
//! fact, and the test fails listing the facts only one side has. Of the CHECKs, the lists of
//! allowed values (`CHECK (col IN (…))`: every state word, every 0/1 flag) are compared too,
//! so a new word widened on one side only is drift.
//!
//! What is deliberately different is listed here, with why ([`POSTGRES_ONLY_COLUMNS`]), or
//! normalized away: SQLite's INTEGER/REAL/BLOB are bigint/double precision/bytea, a column
//! SQLite checks with json_valid is jsonb, and SQLite ends every index of a rowid table with the
//! rowid, which PostgreSQL's indexes name where a query's order needs it (`rowid` last).
//! Other CHECK expressions are not compared (their text differs by dialect);
//! `migrations_postgres/` repeats each one.

use std::collections::BTreeSet;

use threadbase::store::postgres::migrate::migrate;

use crate::support::common::temp_db;
use crate::support::postgres::TestSchema;

/// Columns only PostgreSQL has, each with why.
const POSTGRES_ONLY_COLUMNS: &[(&str, &str, &str)] = &[(
    "threads",
    "rowid",
    "SQLite's implicit rowid (insertion order, which spawn and queue order read) made a column",
)];

/// refinery's own table, on both sides, is not threadbase's schema.
const NOT_COMPARED: &[&str] = &["refinery_schema_history"];

#[test]
fn sqlite_and_postgresql_schemas_agree() {
    let Some(pg) = TestSchema::new("sqlite_and_postgresql_schemas_agree") else {
        return;
    };
    let sqlite = sqlite_facts();
    let postgres = postgres_facts(&pg);
    let only_sqlite: Vec<&String> = sqlite.difference(&postgres).collect();
    let only_postgres: Vec<&String> = postgres.difference(&sqlite).collect();
    if !only_sqlite.is_empty() || !only_postgres.is_empty() {
        let mut report = String::from(
            "the SQLite and PostgreSQL schemas differ (a migration in one of migrations/ and migrations_postgres/ without its counterpart?)\n",
        );
        for f in &only_sqlite {
            report.push_str(&format!("  only in SQLite:     {f}\n"));
        }
        for f in &only_postgres {
            report.push_str(&format!("  only in PostgreSQL: {f}\n"));
        }
        panic!("{report}");
    }
    let count = |kind: &str| sqlite.iter().filter(|f| f.starts_with(kind)).count();
    println!(
        "schema parity: {} tables, {} columns, {} CHECK lists, {} primary keys, {} unique constraints, {} foreign keys, {} indexes, {} views, {} triggers agree ({} facts); PostgreSQL-only: {}",
        count("table "),
        count("column "),
        count("check "),
        count("primary key "),
        count("unique "),
        count("foreign key "),
        count("index "),
        count("view "),
        count("trigger "),
        sqlite.len(),
        POSTGRES_ONLY_COLUMNS
            .iter()
            .map(|(t, c, _)| format!("{t}.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// A partial index's WHERE in one spelling: lowercase, no casts, parentheses or spaces, and
/// PostgreSQL's `= ANY (ARRAY[…])` as SQLite's `IN (…)`.
fn normalize_where(sql: &str) -> String {
    let mut s = sql.to_lowercase();
    for cast in ["::text[]", "::text", "::bigint", "::integer", "::jsonb"] {
        s = s.replace(cast, "");
    }
    s.retain(|c| !c.is_whitespace() && c != '(' && c != ')');
    if let Some(i) = s.find("=anyarray[") {
        let rest = &s[i + "=anyarray[".len()..];
        if let Some(end) = rest.find(']') {
            s = format!("{}in{}{}", &s[..i], &rest[..end], &rest[end + 1..]);
        }
    }
    s
}

fn sqlite_facts() -> BTreeSet<String> {
    let db = temp_db();
    drop(threadbase::Store::open(&db.path).expect("migrate a fresh SQLite file"));
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let query = |sql: &str| -> Vec<Vec<Option<String>>> {
        let mut stmt = conn.prepare(sql).unwrap();
        let n = stmt.column_count();
        stmt.query_map([], |r| {
            (0..n)
                .map(|i| {
                    r.get::<_, rusqlite::types::Value>(i).map(|v| match v {
                        rusqlite::types::Value::Null => None,
                        rusqlite::types::Value::Integer(i) => Some(i.to_string()),
                        rusqlite::types::Value::Text(t) => Some(t),
                        other => Some(format!("{other:?}")),
                    })
                })
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap()
    };
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let mut facts = BTreeSet::new();
    let objects = query(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    );
    for o in &objects {
        let (kind, name, table, sql) = (text(&o[0]), text(&o[1]), text(&o[2]), text(&o[3]));
        if NOT_COMPARED.contains(&table.as_str()) {
            continue;
        }
        match kind.as_str() {
            "table" => {
                facts.insert(format!("table {name}"));
                // The columns SQLite checks with json_valid are JSON.
                let json: BTreeSet<String> = sql
                    .match_indices("json_valid(")
                    .map(|(i, _)| {
                        sql[i + "json_valid(".len()..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect()
                    })
                    .collect();
                let columns = query(&format!(
                    "SELECT name, type, \"notnull\", dflt_value, pk, hidden FROM pragma_table_xinfo('{name}')"
                ));
                let mut pk: Vec<(i64, String)> = Vec::new();
                for c in &columns {
                    let col = text(&c[0]);
                    let ty = if json.contains(&col) {
                        "json".to_string()
                    } else {
                        match text(&c[1]).to_uppercase().as_str() {
                            "INTEGER" => "integer".into(),
                            "REAL" => "real".into(),
                            "TEXT" => "text".into(),
                            "BLOB" => "blob".into(),
                            other => format!("unknown {other}"),
                        }
                    };
                    let pk_pos: i64 = text(&c[4]).parse().unwrap();
                    if pk_pos > 0 {
                        pk.push((pk_pos, col.clone()));
                    }
                    facts.insert(column_fact(
                        &name,
                        &col,
                        &ty,
                        text(&c[2]) == "1" || pk_pos > 0,
                        c[3].is_some(),
                        text(&c[5]) == "2" || text(&c[5]) == "3",
                    ));
                }
                for (col, words) in in_lists(&sql) {
                    facts.insert(check_fact(&name, &col, words));
                }
                pk.sort();
                if !pk.is_empty() {
                    let cols: Vec<String> = pk.into_iter().map(|(_, c)| c).collect();
                    facts.insert(format!("primary key {name} ({})", cols.join(", ")));
                }
                for ix in query(&format!(
                    "SELECT name, \"unique\", origin, partial FROM pragma_index_list('{name}')"
                )) {
                    let (ix_name, origin) = (text(&ix[0]), text(&ix[2]));
                    let cols: Vec<String> = query(&format!(
                        "SELECT name FROM pragma_index_info('{ix_name}') ORDER BY seqno"
                    ))
                    .iter()
                    .map(|r| text(&r[0]))
                    .collect();
                    match origin.as_str() {
                        "u" => {
                            facts.insert(format!("unique {name} ({})", cols.join(", ")));
                        }
                        "c" => {
                            let ix_sql = objects
                                .iter()
                                .find(|o| text(&o[1]) == ix_name)
                                .map(|o| text(&o[3]))
                                .unwrap_or_default();
                            let partial = ix_sql
                                .to_uppercase()
                                .find(" WHERE ")
                                .map(|i| normalize_where(&ix_sql[i + 7..]));
                            facts.insert(index_fact(
                                &ix_name,
                                &name,
                                &cols,
                                text(&ix[1]) == "1",
                                partial,
                            ));
                        }
                        _ => {} // "pk": the primary key, above
                    }
                }
                for fk in query(&format!(
                    "SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('{name}') ORDER BY id, seq"
                )) {
                    facts.insert(format!(
                        "foreign key {name} ({}) -> {} ({}) on delete {}",
                        text(&fk[1]),
                        text(&fk[0]),
                        text(&fk[2]),
                        text(&fk[3]).to_lowercase()
                    ));
                }
            }
            "view" => {
                let cols: Vec<String> =
                    query(&format!("SELECT name FROM pragma_table_info('{name}')"))
                        .iter()
                        .map(|r| text(&r[0]))
                        .collect();
                facts.insert(format!("view {name} ({})", cols.join(", ")));
            }
            "trigger" => {
                facts.insert(format!("trigger {name} on {table}"));
            }
            _ => {}
        }
    }
    facts
}

/// The `CHECK (col IN (…))` lists of a SQLite `CREATE TABLE` statement: (column, its words).
fn in_lists(sql: &str) -> Vec<(String, Vec<String>)> {
    let mut lists = Vec::new();
    let mut rest = sql;
    while let Some(at) = rest.find("CHECK (") {
        rest = &rest[at + "CHECK (".len()..];
        let Some((col, after)) = rest.split_once(" IN (") else {
            continue;
        };
        if col.is_empty() || !col.chars().all(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some((words, _)) = after.split_once(')') else {
            continue;
        };
        lists.push((col.to_string(), split_words(words)));
    }
    lists
}

/// `'a', 'b'` (or `0, 1`, or PostgreSQL's `'a'::text, …`) as the words, sorted.
fn split_words(list: &str) -> Vec<String> {
    let mut words: Vec<String> = list
        .split(',')
        .map(|w| {
            let w = w.trim();
            let w = w.split("::").next().unwrap_or(w);
            w.trim_matches(|c| c == '(' || c == ')' || c == '\'' || c == ' ')
                .to_string()
        })
        .collect();
    words.sort();
    words
}

fn check_fact(table: &str, col: &str, words: Vec<String>) -> String {
    format!("check {table}.{col} in ({})", words.join(", "))
}

fn column_fact(
    table: &str,
    col: &str,
    ty: &str,
    not_null: bool,
    default: bool,
    generated: bool,
) -> String {
    format!(
        "column {table}.{col} {ty}{}{}{}",
        if not_null { " not null" } else { "" },
        if default { " default" } else { "" },
        if generated { " generated" } else { "" }
    )
}

fn index_fact(
    name: &str,
    table: &str,
    cols: &[String],
    unique: bool,
    partial: Option<String>,
) -> String {
    format!(
        "index {name} on {table} ({}){}{}",
        cols.join(", "),
        if unique { " unique" } else { "" },
        partial.map(|w| format!(" where {w}")).unwrap_or_default()
    )
}

fn postgres_facts(pg: &TestSchema) -> BTreeSet<String> {
    let mut client = pg.connect();
    let applied = pg
        .block_on(migrate(&mut client))
        .expect("migrate PostgreSQL");
    assert!(!applied.is_empty(), "a fresh schema gets every migration");
    let rows = |sql: &str| -> Vec<tokio_postgres::Row> {
        pg.block_on(client.query(sql, &[]))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    let skip = |table: &str| NOT_COMPARED.contains(&table);
    let mut facts = BTreeSet::new();
    for r in rows(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'r'",
    ) {
        let t: String = r.get(0);
        if !skip(&t) {
            facts.insert(format!("table {t}"));
        }
    }
    for r in rows(
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                a.atthasdef, a.attgenerated <> ''
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'r'
           AND a.attnum > 0 AND NOT a.attisdropped",
    ) {
        let (t, col, ty): (String, String, String) = (r.get(0), r.get(1), r.get(2));
        if skip(&t)
            || POSTGRES_ONLY_COLUMNS
                .iter()
                .any(|(pt, pc, _)| *pt == t && *pc == col)
        {
            continue;
        }
        let ty = match ty.as_str() {
            "bigint" | "integer" | "smallint" => "integer".to_string(),
            "double precision" | "real" => "real".to_string(),
            "text" => "text".to_string(),
            "bytea" => "blob".to_string(),
            "jsonb" | "json" => "json".to_string(),
            other => format!("unknown {other}"),
        };
        let generated: bool = r.get(5);
        // A generated column's expression is stored as its default.
        let default = r.get::<_, bool>(4) && !generated;
        facts.insert(column_fact(&t, &col, &ty, r.get(3), default, generated));
    }
    for r in rows(
        "SELECT c.relname, con.contype::text, array_agg(a.attname ORDER BY k.n),
                fc.relname, (SELECT array_agg(fa.attname ORDER BY fk.n)
                             FROM unnest(con.confkey) WITH ORDINALITY AS fk (attnum, n)
                             JOIN pg_attribute fa ON fa.attrelid = con.confrelid AND fa.attnum = fk.attnum),
                con.confdeltype::text
         FROM pg_constraint con
         JOIN pg_class c ON c.oid = con.conrelid
         LEFT JOIN pg_class fc ON fc.oid = con.confrelid
         CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k (attnum, n)
         JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND con.contype IN ('p', 'u', 'f')
         GROUP BY con.oid, c.relname, con.contype, fc.relname, con.confdeltype",
    ) {
        let (t, kind, cols): (String, String, Vec<String>) = (r.get(0), r.get(1), r.get(2));
        if skip(&t) {
            continue;
        }
        let cols = cols.join(", ");
        facts.insert(match kind.as_str() {
            "p" => format!("primary key {t} ({cols})"),
            "u" => format!("unique {t} ({cols})"),
            _ => {
                let on_delete = match r.get::<_, String>(5).as_str() {
                    "c" => "cascade",
                    "n" => "set null",
                    "d" => "set default",
                    "r" => "restrict",
                    _ => "no action",
                };
                format!(
                    "foreign key {t} ({cols}) -> {} ({}) on delete {on_delete}",
                    r.get::<_, String>(3),
                    r.get::<_, Vec<String>>(4).join(", ")
                )
            }
        });
    }
    // `col IN (…)` is stored as `(col = ANY (ARRAY[…]))`.
    for r in rows(
        "SELECT c.relname, pg_get_constraintdef(con.oid)
         FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
           AND con.contype = 'c'",
    ) {
        let (t, def): (String, String) = (r.get(0), r.get(1));
        if skip(&t) {
            continue;
        }
        let mut rest = def.as_str();
        while let Some(at) = rest.find(" = ANY (ARRAY[") {
            let col: String = rest[..at]
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            rest = &rest[at + " = ANY (ARRAY[".len()..];
            let Some((words, after)) = rest.split_once(']') else {
                break;
            };
            facts.insert(check_fact(&t, &col, split_words(words)));
            rest = after;
        }
    }
    for r in rows(
        "SELECT i.relname, c.relname, ix.indisunique, pg_get_expr(ix.indpred, ix.indrelid),
                array_agg(a.attname ORDER BY k.n)
         FROM pg_index ix
         JOIN pg_class i ON i.oid = ix.indexrelid
         JOIN pg_class c ON c.oid = ix.indrelid
         CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k (attnum, n)
         JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
           AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = ix.indexrelid)
         GROUP BY i.relname, c.relname, ix.indisunique, ix.indpred, ix.indrelid",
    ) {
        let (name, t): (String, String) = (r.get(0), r.get(1));
        if skip(&t) {
            continue;
        }
        let mut cols: Vec<String> = r.get(4);
        // SQLite ends every index of a rowid table with the rowid, unnamed.
        if cols.last().is_some_and(|c| c == "rowid") {
            cols.pop();
        }
        let partial: Option<String> = r.get(3);
        facts.insert(index_fact(
            &name,
            &t,
            &cols,
            r.get(2),
            partial.map(|w| normalize_where(&w)),
        ));
    }
    for r in rows(
        "SELECT c.relname, array_agg(a.attname ORDER BY a.attnum)
         FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'v'
         GROUP BY c.relname",
    ) {
        facts.insert(format!(
            "view {} ({})",
            r.get::<_, String>(0),
            r.get::<_, Vec<String>>(1).join(", ")
        ));
    }
    for r in rows(
        "SELECT tg.tgname, c.relname FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND NOT tg.tgisinternal",
    ) {
        facts.insert(format!(
            "trigger {} on {}",
            r.get::<_, String>(0),
            r.get::<_, String>(1)
        ));
    }
    facts
}

#[test]
fn every_text_column_compares_bytewise_as_sqlites_do() {
    let Some(pg) = TestSchema::new("every_text_column_compares_bytewise_as_sqlites_do") else {
        return;
    };
    let mut client = pg.connect();
    pg.block_on(migrate(&mut client)).expect("migrate");
    let rows = pg
        .block_on(client.query(
            "SELECT c.relname || '.' || a.attname, coalesce(co.collname, '(default)')
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             LEFT JOIN pg_collation co ON co.oid = a.attcollation
             WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'r'
               AND c.relname <> 'refinery_schema_history'
               AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid = 'text'::regtype",
            &[],
        ))
        .unwrap();
    assert!(rows.len() > 100, "{} text columns", rows.len());
    let not_c: Vec<String> = rows
        .iter()
        .filter(|r| r.get::<_, String>(1) != "C")
        .map(|r| format!("{} ({})", r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect();
    assert!(
        not_c.is_empty(),
        "text columns without COLLATE \"C\" (they would sort by the database's locale): {not_c:?}"
    );
}

#[test]
fn check_lists_are_read_from_either_dialect() {
    assert_eq!(
        in_lists("a TEXT CHECK (kind IN ('x', 'y')), b INTEGER CHECK (b IN (0, 1)), CHECK (c > 0)"),
        vec![
            ("kind".to_string(), vec!["x".to_string(), "y".to_string()]),
            ("b".to_string(), vec!["0".to_string(), "1".to_string()])
        ]
    );
    assert_eq!(split_words("'y'::text, 'x'::text"), split_words("'x', 'y'"));
}

#[test]
fn partial_index_conditions_are_compared_in_one_spelling() {
    assert_eq!(
        normalize_where("(agent_state = ANY (ARRAY['starting'::text, 'running'::text]))"),
        normalize_where("agent_state IN ('starting', 'running')")
    );
    assert_eq!(
        normalize_where("((coordinator_id IS NOT NULL) AND (spawn_key IS NOT NULL))"),
        normalize_where("coordinator_id IS NOT NULL AND spawn_key IS NOT NULL")
    );
    assert_ne!(
        normalize_where("(status = 'live'::text)"),
        normalize_where("status = 'closed'")
    );
}
