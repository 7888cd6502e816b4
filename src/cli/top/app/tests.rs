use super::{App, Item};
use crate::domain::{Contract, Phase, SessionId, ThreadId, ThreadStatus};
use crate::runtime::signals::ProcessIdentity;
use crate::store::threads::{insert_thread, upsert_manager, ManagerSpec, NewThread};

/// Live idle threads `/root/<task>` of session `ses`, ids `thread_00000000000<i>`.
fn live_idle_threads(tx: &crate::store::Conn, tasks: &[&str]) -> crate::error::Result<()> {
    let m = upsert_manager(
        tx,
        &ManagerSpec::new(&SessionId::new("ses"), Contract::Thread, "/root"),
    )?;
    for (i, task) in tasks.iter().enumerate() {
        insert_thread(
            tx,
            &NewThread {
                id: ThreadId::new(format!("thread_00000000000{i}")),
                manager_id: m,
                path: format!("/root/{task}"),
                parent_path: Some("/root".into()),
                task_name: task.to_string(),
                name: task.to_string(),
                cwd: "/w".into(),
                status: ThreadStatus::Live,
                phase: Phase::Idle,
                ..Default::default()
            },
        )?;
    }
    Ok(())
}

/// A live row whose owning serve is gone (a reused pid: the start time differs) reads
/// `live/owner gone` and is counted apart in the header, not as live; nothing is written.
#[test]
fn a_live_row_whose_owner_is_gone_is_counted_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let store = crate::store::Store::open(&path).unwrap();
    let me = ProcessIdentity::current();
    store
            .write(|tx| {
                live_idle_threads(tx, &["held", "orphan", "done"])?;
                tx.sqlite().unwrap().execute(
                    "UPDATE threads SET owner_pid = ?1, owner_started_at = CASE path WHEN '/root/held' THEN ?2 ELSE ?2 + 12345 END",
                    [me.pid, me.started_at],
                )?;
                tx.sqlite().unwrap().execute_batch(
                    "UPDATE threads SET status = 'closed', phase = 'stale', exit_kind = 'stopped' WHERE path = '/root/done'",
                )?;
                Ok(())
            })
            .unwrap();
    let mut app = App::new(path.clone(), crate::store::open_read_only(&path).unwrap());
    app.reload();
    assert_eq!(app.counts, (1, 1, 1));
    let state = |p: &str| app.rows.iter().find(|r| r.path == p).unwrap().state_text();
    assert_eq!(state("/root/held"), "live/idle");
    assert_eq!(state("/root/orphan"), "live/owner gone");
    assert_eq!(state("/root/done"), "closed/stopped");
    let live: i64 = crate::store::open_read_only(&path)
        .unwrap()
        .sqlite()
        .unwrap()
        .query_row(
            "SELECT count(*) FROM threads WHERE status = 'live'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(live, 2, "reading wrote nothing");
}

/// Issue 33: a live row of another host is never "owner gone" here, whatever its pid names on
/// this machine (its serve's pid is dead here), and one of a host whose lease ran out reads
/// `host unreachable`; the tree gets a HOST column, and a stop of the unreachable one is
/// refused at once in the footer. Nothing is written.
#[test]
fn rows_of_other_hosts_show_their_host_and_an_unreachable_one_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let store = crate::store::Store::open(&path).unwrap();
    let me = ProcessIdentity::current();
    let here = crate::host::HostIdentity::here().host_id.clone();
    store
            .write(|tx| {
                live_idle_threads(tx, &["mine", "up", "down"])?;
                // Every owner's pid is dead here (a start time that is not this process's).
                tx.sqlite().unwrap().execute(
                    "UPDATE threads SET owner_pid = ?1, owner_started_at = ?2 + 12345, boot_id = 'b',
                       host_id = CASE path WHEN '/root/mine' THEN ?3 WHEN '/root/up' THEN 'host-up' ELSE 'host-down' END",
                    (me.pid, me.started_at, &here),
                )?;
                tx.sqlite().unwrap().execute_batch(
                    "INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at) VALUES ('host-up', 'b', 7, 7, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
                     INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at) VALUES ('host-down', 'b', 7, 7, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
                )?;
                Ok(())
            })
            .unwrap();
    let mut app = App::new(path.clone(), crate::store::open_read_only(&path).unwrap());
    app.reload();
    assert!(app.team);
    let row = |p: &str| app.rows.iter().find(|r| r.path == p).unwrap().clone();
    assert_eq!(row("/root/mine").state_text(), "live/owner gone");
    assert_eq!(row("/root/up").state_text(), "live/idle");
    assert_eq!(row("/root/up").host.as_deref(), Some("host-up"));
    assert_eq!(row("/root/down").state_text(), "live/host unreachable");
    assert_eq!(
        row("/root/down").unreachable_since.as_deref(),
        Some("2026-01-01T00:00:00.000Z")
    );
    assert_eq!(app.counts, (2, 0, 1));
    let at = app
        .items
        .iter()
        .position(
            |it| matches!(it, Item::Thread { row, .. } if app.rows[*row].path == "/root/down"),
        )
        .unwrap();
    app.select(at);
    let detail: Vec<String> = app.detail.iter().map(|l| l.to_string()).collect();
    assert!(
        detail.contains(
            &"host host-down: unreachable since 2026-01-01 00:00:00; nothing can reach this thread (threadbase host forget host-down closes its threads as stale)".to_string()
        ),
        "{detail:#?}"
    );
    let up = app
        .items
        .iter()
        .position(|it| matches!(it, Item::Thread { row, .. } if app.rows[*row].path == "/root/up"))
        .unwrap();
    app.select(up);
    let detail: Vec<String> = app.detail.iter().map(|l| l.to_string()).collect();
    assert!(detail.contains(&"host host-up".to_string()), "{detail:#?}");
    app.select(at);
    app.ask_stop(false);
    assert!(
        app.message
            .contains("held on host host-down, unreachable since 2026-01-01T00:00:00.000Z")
            && app.message.contains("threadbase host forget host-down"),
        "{}",
        app.message
    );
    let live: i64 = crate::store::open_read_only(&path)
        .unwrap()
        .sqlite()
        .unwrap()
        .query_row(
            "SELECT count(*) FROM threads WHERE status = 'live'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(live, 3, "reading wrote nothing");
}

/// Six root sessions of three threads each, started a second apart (the oldest first).
fn six_sessions() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let store = crate::store::Store::open(&path).unwrap();
    store
            .write(|tx| {
                for n in 0..6 {
                    let session = SessionId::new(format!("ses_{n}"));
                    let m =
                        upsert_manager(tx, &ManagerSpec::new(&session, Contract::Thread, "/root"))?;
                    tx.sqlite().unwrap().execute(
                        "UPDATE managers SET created_at = ?1 WHERE id = ?2",
                        (format!("2026-12-0{}T10:00:00.000Z", n + 1), m),
                    )?;
                    for (i, task) in ["quick", "docs", "tests"].into_iter().enumerate() {
                        insert_thread(
                            tx,
                            &NewThread {
                                id: ThreadId::new(format!("thread_0000000{n}000{i}")),
                                manager_id: m,
                                path: format!("/root/{task}"),
                                parent_path: Some("/root".into()),
                                task_name: task.into(),
                                name: task.into(),
                                cwd: "/w".into(),
                                status: ThreadStatus::Live,
                                phase: Phase::Idle,
                                ..Default::default()
                            },
                        )?;
                    }
                }
                tx.sqlite().unwrap().execute_batch(
                    "UPDATE threads SET status = 'closed', exit_kind = 'exited' WHERE path <> '/root/quick'",
                )?;
                Ok(())
            })
            .unwrap();
    (dir, path)
}

/// The screen of `app` drawn at `w`×`h`, a string per line.
fn screen(app: &mut App, w: u16, h: u16) -> Vec<String> {
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect()
}

fn press(app: &mut App, c: char) {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
}

/// Many sessions: the newest first and open, each older one a single line with its start
/// and live/closed counts, so at 80×24 every one of six sessions is on screen (all open,
/// two fitted); `e` opens the selected session and closes it again, and the footer names
/// the key.
#[test]
fn older_sessions_fold_to_a_line_each_and_e_opens_one() {
    let (_dir, path) = six_sessions();
    let mut app = App::new(path.clone(), crate::store::open_read_only(&path).unwrap());
    app.reload();
    let lines = screen(&mut app, 80, 24);
    let text = lines.join("\n");
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not on screen:\n{text}"))
    };
    // Newest first: ses_5 open (its heading, then its threads), then ses_4 … ses_0 folded.
    let order: Vec<usize> = (0..6).rev().map(|n| at(&format!("ses_{n}"))).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(lines[order[0]].contains("▾ session ses_5"), "{text}");
    assert!(lines[order[0] + 1].contains("/root/quick"), "{text}");
    assert_eq!(
        order[1],
        order[0] + 4,
        "three threads under the newest:\n{text}"
    );
    for n in 0..5 {
        let line = &lines[at(&format!("ses_{n}"))];
        assert!(line.contains("▸ session ses_"), "{line}");
        assert!(
            line.contains(&format!(
                "started 2026-12-0{} 10:00:00 · 1 live 2 closed",
                n + 1
            )),
            "{line}"
        );
    }
    assert_eq!(
        order
            .windows(2)
            .skip(1)
            .filter(|w| w[1] == w[0] + 1)
            .count(),
        4,
        "older sessions are a line each:\n{text}"
    );
    assert!(
        lines[23].contains("e session"),
        "the footer names the key:\n{text}"
    );
    assert_eq!(app.counts, (6, 12, 0), "counts are of every session");

    // `e` on ses_3's line opens it; its threads follow it; `e` on one of them closes it.
    let ses3 = app
        .items
        .iter()
        .position(|it| matches!(it, Item::Manager { key, .. } if key == "r:ses_3"))
        .unwrap();
    app.select(ses3);
    let detail = format!("{:?}", app.detail);
    assert!(
        detail.contains("session ses_3") && detail.contains("3 threads"),
        "a folded session's detail is its whole heading: {detail}"
    );
    press(&mut app, 'e');
    assert!(matches!(&app.items[ses3], Item::Manager { open: true, .. }));
    assert!(matches!(&app.items[ses3 + 1], Item::Thread { .. }));
    assert_eq!(app.selected, ses3, "the selection stays on the session");
    app.select(ses3 + 2);
    press(&mut app, 'e');
    assert!(matches!(
        &app.items[ses3],
        Item::Manager { open: false, .. }
    ));
    assert_eq!(app.selected, ses3);
    assert!(matches!(&app.items[ses3 + 1], Item::Manager { .. }));
    // And the newest can be closed too: every session a line.
    app.select(0);
    press(&mut app, 'e');
    assert_eq!(app.items.len(), 6);
}

/// `top --session`: only that session's tree, open, even when it is not the newest.
#[test]
fn one_session_is_shown_open() {
    let (_dir, path) = six_sessions();
    let conn = crate::store::open_read_only(&path).unwrap();
    let root = crate::store::sessions::select(&conn, "ses_2")
        .unwrap()
        .root_session;
    let mut app = App::new(path.clone(), conn);
    app.only_session(root);
    app.reload();
    assert_eq!(app.items.len(), 4, "{:?}", app.items);
    assert!(matches!(&app.items[0], Item::Manager { key, open: true, .. } if key == "r:ses_2"));
    assert_eq!(app.counts, (1, 2, 0));
}
