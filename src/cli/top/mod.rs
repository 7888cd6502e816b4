//! `threadbase top`: a terminal view of every root session's thread tree (newest first, older
//! sessions folded to a line each), read from a read-only
//! connection and refreshed only when the database's change counter (`PRAGMA data_version`)
//! moves. The one write it makes is an emergency stop: a `commands` row that the owning `serve`
//! carries out (see `watcher`), on a separate writable connection opened only for that.
//!
//! Split by what each part answers to: [`app`] (the state and the keys), [`view`] (drawing
//! it), [`data`] (the reads: a subtree is one index range per manager); this file runs the
//! terminal.

mod app;
mod data;
mod detail;
mod view;

use std::io::IsTerminal;
use std::io::Stdout;
use std::path::Path;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyEventKind};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::error::Result;
use crate::store::open_read_only;
use app::App;

/// How often the change counter is read (and the longest a key waits to be seen).
const POLL: Duration = Duration::from_millis(200);

/// The STATE column of every row `top` shows, as `(path, state)` in its tree's order: what a
/// test reads beside the other surfaces (issue 45: every surface says the same word).
#[doc(hidden)]
pub fn states(db: &Path) -> Result<Vec<(String, String)>> {
    let conn = open_read_only(db)?;
    Ok(data::load_rows(&conn, "")?
        .rows
        .iter()
        .map(|r| (r.path.clone(), r.state_text()))
        .collect())
}

/// The TOKENS column of every row `top` shows, as `(path, tokens)`: what a test reads to see a
/// thread's spend move while it streams (issue 49).
#[doc(hidden)]
pub fn spends(db: &Path) -> Result<Vec<(String, i64)>> {
    let conn = open_read_only(db)?;
    Ok(data::load_rows(&conn, "")?
        .rows
        .iter()
        .map(|r| (r.path.clone(), r.tokens))
        .collect())
}

/// Runs the terminal UI on `db` until `q` (with `session`: only that Pi session's tree).
pub fn run(db: &Path, session: Option<&str>) -> Result<()> {
    need_a_terminal(
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    )?;
    let conn = open_read_only(db)?;
    let only = match session {
        Some(s) => Some(crate::store::sessions::select(&conn, s)?.root_session),
        None => None,
    };
    let mut app = App::new(db.to_path_buf(), conn);
    if let Some(root) = only {
        app.only_session(root);
    }
    app.reload();
    let _guard = TermGuard::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    term.clear()?;
    event_loop(&mut app, &mut term)
}

fn event_loop(app: &mut App, term: &mut Terminal<CrosstermBackend<Stdout>>) -> Result<()> {
    let mut dirty = true;
    let mut last_draw = Instant::now();
    let mut last_check = Instant::now();
    loop {
        if dirty {
            term.draw(|f| app.draw(f))?;
            dirty = false;
            last_draw = Instant::now();
        }
        let wait = POLL.saturating_sub(last_check.elapsed());
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(k) if k.kind == KeyEventKind::Press => {
                    if app.key(k) {
                        return Ok(());
                    }
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        if last_check.elapsed() >= POLL {
            last_check = Instant::now();
            if app.changed() {
                app.reload();
                dirty = true;
            }
        }
        // Ages are relative: redraw (from memory, no query) once a second.
        if last_draw.elapsed() >= Duration::from_secs(1) {
            dirty = true;
        }
    }
}

/// Raw mode and the alternate screen, undone on drop (and on panic).
/// `top` draws on a terminal and reads its keys: without one (a pipe, a file, a CI job, `ssh`
/// without `-t`) it says so, before touching the database, instead of failing in raw mode.
fn need_a_terminal(stdin: bool, stdout: bool) -> Result<()> {
    let missing = match (stdin, stdout) {
        (true, true) => return Ok(()),
        (false, true) => "its input is not a terminal",
        (true, false) => "its output is not a terminal",
        (false, false) => "neither its input nor its output is a terminal",
    };
    Err(crate::error::Error::invalid(format!(
        "threadbase top needs a terminal to draw on and read keys from, and {missing}. Repair: run it in a terminal (with `ssh -t` over ssh); for a one-shot view that prints and exits, use `threadbase tree` or `threadbase list`, or `threadbase sql` for the rows."
    )))
}

struct TermGuard;

impl TermGuard {
    fn enter() -> Result<TermGuard> {
        enable_raw_mode()?;
        crossterm::execute!(std::io::stdout(), EnterAlternateScreen)?;
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            leave_terminal();
            prev(info);
        }));
        Ok(TermGuard)
    }
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        leave_terminal();
    }
}

fn leave_terminal() {
    let _ = disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}
