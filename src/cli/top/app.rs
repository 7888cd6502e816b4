//! Top's state and its keys: the tree built from the loaded rows (one per root session,
//! threads under their nearest shown ancestor), the selection kept across reloads, the filter
//! and search inputs, and the stop and restore actions.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::text::Line;

use super::data::{load_rows, thread_snapshot, usage_text, Row};
use super::detail::detail_lines;
use crate::cli::forest;
use crate::domain::ThreadId;
use crate::error::Result;
use crate::runtime::signals::ProcessIdentity;
use crate::store::commands::{self, CommandKind};
use crate::store::list::{StateFilter, VisibilityFilter};
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum InputKind {
    Search,
    Subtree,
    /// The answer to the question of the thread with this id (THREADBASE_UI=parent).
    Answer(String),
}

/// One line of the tree: a session (or, before V4, manager) header or a thread.
#[derive(Debug, Clone)]
pub(super) enum Item {
    Manager {
        key: String,
        label: String,
        /// The whole heading (session id, name, cwd, start, threads): the detail pane's text.
        heading: String,
        /// Its threads are shown below it.
        open: bool,
    },
    Thread {
        row: usize,
        depth: usize,
        has_children: bool,
    },
}

pub(super) struct App {
    db: PathBuf,
    conn: crate::store::OpenConn,
    writer: Option<Store>,
    version: Option<i64>,
    /// The rows of the subtree (every thread without one); the other filters apply as the
    /// tree is built.
    pub(super) rows: Vec<Row>,
    /// Every thread's forest parent, shown or not, so a hidden parent is walked past.
    forest_parents: HashMap<String, String>,
    /// The database knows a host other than this one: the tree shows a HOST column.
    pub(super) team: bool,
    pub(super) items: Vec<Item>,
    /// The selected item's key (manager key or thread id), kept across reloads.
    selected_key: Option<String>,
    pub(super) selected: usize,
    pub(super) scroll: usize,
    pub(super) state: StateFilter,
    pub(super) visibility: VisibilityFilter,
    pub(super) subtree: String,
    pub(super) search: String,
    pub(super) input: Option<(InputKind, String)>,
    pub(super) collapsed: HashSet<String>,
    /// Sessions opened or closed by hand (`e`, or Enter on the header), by group key; the
    /// others follow the default: the newest open, older ones a line each.
    session_open: HashMap<String, bool>,
    /// `--session`: only this root session's tree, open.
    only_session: Option<String>,
    /// A pending stop: (thread id, path, force).
    confirm: Option<(String, String, bool)>,
    pub(super) message: String,
    pub(super) help: bool,
    pub(super) detail: Vec<Line<'static>>,
    /// Live, closed, and live rows whose owning serve is gone (not counted as live).
    pub(super) counts: (usize, usize, usize),
    /// Each root session's cwd, start and name, newest first: the order of the trees and
    /// their headings.
    roots: Vec<forest::RootInfo>,
}

impl App {
    pub(super) fn new(db: PathBuf, conn: crate::store::OpenConn) -> App {
        App {
            db,
            conn,
            writer: None,
            version: None,
            rows: Vec::new(),
            forest_parents: HashMap::new(),
            team: false,
            items: Vec::new(),
            selected_key: None,
            selected: 0,
            scroll: 0,
            state: StateFilter::All,
            visibility: VisibilityFilter::Active,
            subtree: String::new(),
            search: String::new(),
            input: None,
            collapsed: HashSet::new(),
            session_open: HashMap::new(),
            only_session: None,
            confirm: None,
            message: String::new(),
            help: false,
            detail: Vec::new(),
            counts: (0, 0, 0),
            roots: Vec::new(),
        }
    }

    /// Shows only one root session's tree (`top --session`).
    pub(super) fn only_session(&mut self, root: String) {
        self.only_session = Some(root);
    }

    /// Whether another connection committed since the last reload.
    pub(super) fn changed(&mut self) -> bool {
        match self.conn.data_version() {
            Ok(v) => self.version != Some(v),
            Err(_) => false,
        }
    }

    /// Re-reads the threads, rebuilds the tree and the selected thread's detail.
    pub(super) fn reload(&mut self) {
        self.version = self.conn.data_version().ok();
        match load_rows(&self.conn, &self.subtree) {
            Ok(loaded) => {
                self.rows = loaded.rows;
                self.forest_parents = loaded.forest_parents;
                self.team = loaded.team;
            }
            Err(e) => self.message = format!("reading the database failed: {}", e.message),
        }
        if let Ok(roots) = crate::store::sessions::infos(&self.conn) {
            self.roots = roots;
        }
        self.rebuild();
    }

    /// List's state and visibility filters, and the search (the subtree was read).
    fn visible(&self, r: &Row) -> bool {
        let needle = self.search.to_lowercase();
        let search_ok = needle.is_empty()
            || r.name.to_lowercase().contains(&needle)
            || r.task_name.to_lowercase().contains(&needle);
        r.passes(self.state, self.visibility) && search_ok
    }

    /// Builds the items from the rows: one tree per root session (a child's own manager's
    /// threads nested under the thread whose session it is), newest session first, threads
    /// under their nearest shown ancestor, live before closed within a parent, otherwise in
    /// path order. The newest session is open; older ones are one line each (name, start,
    /// live and closed counts) until opened; a search, a subtree or `--session` opens every
    /// session shown.
    fn rebuild(&mut self) {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let (mut live, mut closed, mut gone) = (0, 0, 0);
        for (i, r) in self.rows.iter().enumerate() {
            if !self.visible(r) {
                continue;
            }
            if let Some(only) = &self.only_session {
                if r.root.as_ref() != Some(only) {
                    continue;
                }
            }
            if r.owner_gone() {
                gone += 1;
            } else if r.live() {
                live += 1;
            } else {
                closed += 1;
            }
            let key = group_key(r);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(i),
                None => groups.push((key, vec![i])),
            }
        }
        self.counts = (live, closed, gone);
        // Newest session first (the order of `roots`); per-manager groups (no places) last.
        let rank = |key: &str| {
            key.strip_prefix("r:")
                .and_then(|root| self.roots.iter().position(|i| i.root_session == root))
                .unwrap_or(usize::MAX)
        };
        groups.sort_by_key(|(key, _)| rank(key));
        let open_all =
            self.only_session.is_some() || !self.search.is_empty() || !self.subtree.is_empty();
        let mut items = Vec::new();
        for (n, (key, members)) in groups.iter().enumerate() {
            let open = self
                .session_open
                .get(key)
                .copied()
                .unwrap_or(open_all || n == 0);
            let first = &self.rows[members[0]];
            let info = first.root.as_ref().map(|root| {
                self.roots
                    .iter()
                    .find(|i| &i.root_session == root)
                    .cloned()
                    .unwrap_or_else(|| forest::RootInfo {
                        root_session: root.clone(),
                        ..Default::default()
                    })
            });
            let heading = match &info {
                Some(info) => forest::heading_of(info, members.len()),
                None => format!(
                    "manager {} ({}) · {} thread{}",
                    first.session,
                    first.contract,
                    members.len(),
                    if members.len() == 1 { "" } else { "s" }
                ),
            };
            let label = match (&info, open) {
                (Some(info), false) => {
                    let rows = members.iter().map(|&i| &self.rows[i]);
                    folded_label(info, rows)
                }
                _ => heading.clone(),
            };
            items.push(Item::Manager {
                key: key.clone(),
                label,
                heading,
                open,
            });
            if !open {
                continue;
            }
            let by_id: HashMap<&str, usize> = members
                .iter()
                .map(|&i| (self.rows[i].id.as_str(), i))
                .collect();
            let by_path: HashMap<(&str, &str), usize> = members
                .iter()
                .map(|&i| {
                    (
                        (self.rows[i].session.as_str(), self.rows[i].path.as_str()),
                        i,
                    )
                })
                .collect();
            let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
            for &i in members {
                let row = &self.rows[i];
                let mut parent = None;
                if row.forest_parent.is_some() {
                    let mut cur = row.forest_parent.as_deref();
                    while let Some(id) = cur {
                        if let Some(&j) = by_id.get(id) {
                            parent = Some(j);
                            break;
                        }
                        cur = self.forest_parents.get(id).map(String::as_str);
                    }
                } else if row.root.is_none() {
                    let mut p = crate::paths::parent_path(&row.path);
                    while let Some(pp) = p {
                        if let Some(&j) = by_path.get(&(row.session.as_str(), pp)) {
                            parent = Some(j);
                            break;
                        }
                        p = crate::paths::parent_path(pp);
                    }
                }
                children.entry(parent).or_default().push(i);
            }
            for v in children.values_mut() {
                v.sort_by(|&a, &b| {
                    let (ra, rb) = (&self.rows[a], &self.rows[b]);
                    (!ra.live(), crate::paths::sort_key(&ra.path))
                        .cmp(&(!rb.live(), crate::paths::sort_key(&rb.path)))
                });
            }
            let mut stack: Vec<(usize, usize)> = children
                .get(&None)
                .map(|v| v.iter().rev().map(|&i| (i, 0)).collect())
                .unwrap_or_default();
            while let Some((i, depth)) = stack.pop() {
                let kids = children.get(&Some(i));
                items.push(Item::Thread {
                    row: i,
                    depth,
                    has_children: kids.is_some(),
                });
                if let Some(kids) = kids {
                    if !self.collapsed.contains(&self.rows[i].id) {
                        stack.extend(kids.iter().rev().map(|&k| (k, depth + 1)));
                    }
                }
            }
        }
        self.items = items;
        // Keep the selection on the same item, else on the nearest line.
        let found = self.selected_key.as_ref().and_then(|k| {
            self.items
                .iter()
                .position(|it| self.item_key(it).as_deref() == Some(k))
        });
        self.selected = match found {
            Some(i) => i,
            None => self.selected.min(self.items.len().saturating_sub(1)),
        };
        self.selected_key = self
            .items
            .get(self.selected)
            .and_then(|it| self.item_key(it));
        self.load_detail();
    }

    fn item_key(&self, it: &Item) -> Option<String> {
        match it {
            Item::Manager { key, .. } => Some(key.clone()),
            Item::Thread { row, .. } => self.rows.get(*row).map(|r| r.id.clone()),
        }
    }

    fn selected_row(&self) -> Option<&Row> {
        match self.items.get(self.selected)? {
            Item::Thread { row, .. } => self.rows.get(*row),
            Item::Manager { .. } => None,
        }
    }

    fn select(&mut self, i: usize) {
        if self.items.is_empty() {
            return;
        }
        self.selected = i.min(self.items.len() - 1);
        self.selected_key = self
            .items
            .get(self.selected)
            .and_then(|it| self.item_key(it));
        self.load_detail();
    }

    fn load_detail(&mut self) {
        let row = self.selected_row();
        self.detail = match row.map(|r| ThreadId::new(&r.id)) {
            None => match self.items.get(self.selected) {
                Some(Item::Manager { heading, .. }) => vec![Line::from(heading.clone())],
                _ => vec![Line::from("(no threads match the filters)")],
            },
            Some(id) => match thread_snapshot(&self.conn, &id) {
                Ok(Some(snap)) => {
                    let mut lines = detail_lines(&snap);
                    let host = row.and_then(|r| self.host_line(r));
                    lines.splice(
                        3..3,
                        host.into_iter()
                            .chain(usage_text(&self.conn, &id))
                            .map(Line::from),
                    );
                    lines
                }
                Ok(None) => vec![Line::from(format!("{id}: gone"))],
                Err(e) => vec![Line::from(format!("reading {id} failed: {}", e.message))],
            },
        };
    }

    /// Handles one key; true to quit.
    pub(super) fn key(&mut self, k: KeyEvent) -> bool {
        if let Some((kind, mut buf)) = self.input.take() {
            match k.code {
                KeyCode::Enter => {
                    match kind {
                        InputKind::Search => self.search = buf,
                        InputKind::Subtree => self.subtree = buf,
                        InputKind::Answer(id) => {
                            self.message = match self.answer(&ThreadId::new(id), &buf) {
                                Ok(text) => text,
                                Err(e) => format!("answer failed: {}", e.message),
                            };
                        }
                    }
                    self.reload();
                }
                KeyCode::Esc => {
                    match kind {
                        InputKind::Search => self.search.clear(),
                        InputKind::Subtree => self.subtree.clear(),
                        InputKind::Answer(_) => self.message = "answer cancelled".to_string(),
                    }
                    self.reload();
                }
                KeyCode::Backspace => {
                    buf.pop();
                    self.input = Some((kind, buf));
                }
                KeyCode::Char(c) => {
                    buf.push(c);
                    self.input = Some((kind, buf));
                }
                _ => self.input = Some((kind, buf)),
            }
            return false;
        }
        if let Some((id, path, force)) = self.confirm.take() {
            self.message = if k.code == KeyCode::Char('y') {
                match self.request_stop(&ThreadId::new(id), force) {
                    Ok(()) => format!(
                        "{} requested for {path}; its serve carries it out",
                        if force { "force stop" } else { "stop" }
                    ),
                    Err(e) => format!("stop failed: {}", e.message),
                }
            } else {
                "stop cancelled".to_string()
            };
            return false;
        }
        if self.help {
            self.help = false;
            if matches!(k.code, KeyCode::Char('?') | KeyCode::Esc) {
                return false;
            }
        }
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            return true;
        }
        self.message.clear();
        match k.code {
            KeyCode::Char('q') => return true,
            KeyCode::Down | KeyCode::Char('j') => self.select(self.selected + 1),
            KeyCode::Up | KeyCode::Char('k') => self.select(self.selected.saturating_sub(1)),
            KeyCode::PageDown => self.select(self.selected + 10),
            KeyCode::PageUp => self.select(self.selected.saturating_sub(10)),
            KeyCode::Home | KeyCode::Char('g') => self.select(0),
            KeyCode::End | KeyCode::Char('G') => self.select(usize::MAX),
            KeyCode::Enter | KeyCode::Char(' ') => match self.items.get(self.selected) {
                Some(Item::Manager { .. }) => self.toggle_session(),
                Some(Item::Thread {
                    row,
                    has_children: true,
                    ..
                }) => {
                    let id = self.rows[*row].id.clone();
                    if !self.collapsed.remove(&id) {
                        self.collapsed.insert(id);
                    }
                    self.rebuild();
                }
                _ => {}
            },
            KeyCode::Char('e') => self.toggle_session(),
            KeyCode::Char('f') => {
                self.state = match self.state {
                    StateFilter::All => StateFilter::Live,
                    StateFilter::Live => StateFilter::Closed,
                    StateFilter::Closed => StateFilter::All,
                };
                self.reload();
            }
            KeyCode::Char('v') => {
                self.visibility = match self.visibility {
                    VisibilityFilter::Active => VisibilityFilter::Archived,
                    VisibilityFilter::Archived => VisibilityFilter::All,
                    VisibilityFilter::All => VisibilityFilter::Active,
                };
                self.reload();
            }
            KeyCode::Char('/') => self.input = Some((InputKind::Search, self.search.clone())),
            KeyCode::Char('p') => {
                let start = if self.subtree.is_empty() {
                    self.selected_row()
                        .map(|r| r.path.clone())
                        .unwrap_or_default()
                } else {
                    self.subtree.clone()
                };
                self.input = Some((InputKind::Subtree, start));
            }
            KeyCode::Esc => {
                self.search.clear();
                self.subtree.clear();
                self.reload();
            }
            KeyCode::Char('a') => match self.selected_row() {
                Some(r) if r.live() => {
                    self.input = Some((InputKind::Answer(r.id.clone()), String::new()))
                }
                _ => self.message = "select a live thread whose question waits".to_string(),
            },
            KeyCode::Char('s') => self.ask_stop(false),
            KeyCode::Char('S') => self.ask_stop(true),
            KeyCode::Char('r') => {
                self.message = match self.restore() {
                    Ok((n, k)) => format!(
                        "restore pass: {n} thread{} closed as stale, {k} process group{} killed",
                        if n == 1 { "" } else { "s" },
                        if k == 1 { "" } else { "s" }
                    ),
                    Err(e) => format!("restore failed: {}", e.message),
                };
            }
            KeyCode::Char('?') => self.help = true,
            _ => {}
        }
        false
    }

    /// Opens or closes the session of the selected line (its header, or a thread in it), and
    /// keeps the selection on that session's header.
    fn toggle_session(&mut self) {
        let header = self.items[..=self.selected.min(self.items.len().saturating_sub(1))]
            .iter()
            .rposition(|it| matches!(it, Item::Manager { .. }));
        let Some(Item::Manager { key, open, .. }) = header.map(|i| self.items[i].clone()) else {
            return;
        };
        self.session_open.insert(key.clone(), !open);
        self.selected_key = Some(key);
        self.rebuild();
    }

    /// The detail's line for the host that holds `r`, on a database more than one host uses:
    /// its name, and since when its lease ran out while `r` is live (issue 33).
    fn host_line(&self, r: &Row) -> Option<String> {
        let host = r.host.as_deref().filter(|_| self.team)?;
        Some(match r.unreachable_since.as_deref().filter(|_| r.live()) {
            Some(since) => format!(
                "host {host}: unreachable since {}; nothing can reach this thread (threadbase host forget {host} closes its threads as stale)",
                forest::short_time(since)
            ),
            None => format!("host {host}"),
        })
    }

    fn ask_stop(&mut self, force: bool) {
        let Some(r) = self.selected_row().cloned() else {
            self.message = "select a thread to stop".to_string();
            return;
        };
        if !r.live() {
            self.message = format!("{} is already closed", r.path);
            return;
        }
        if let (Some(since), Some(host)) = (&r.unreachable_since, &r.host) {
            self.message = format!(
                "{} is held on host {host}, unreachable since {since}: nothing can reach it (threadbase host forget {host} closes its threads)",
                r.path
            );
            return;
        }
        let owner_alive = r.owner.is_some_and(|o| o.is_alive());
        if !owner_alive {
            self.message = format!(
                "owner{} of {} is gone: r runs the restore pass",
                r.owner.map(|o| format!(" {}", o.pid)).unwrap_or_default(),
                r.path
            );
            return;
        }
        self.message = format!(
            "{} {}? y to confirm, any other key cancels",
            if force {
                "FORCE-STOP (SIGKILL)"
            } else {
                "stop"
            },
            r.path
        );
        self.confirm = Some((r.id.clone(), r.path.clone(), force));
    }

    fn writer(&mut self) -> Result<&Store> {
        if self.writer.is_none() {
            self.writer = Some(Store::open(&self.db)?);
        }
        Ok(self.writer.as_ref().expect("opened above"))
    }

    /// Answers the pending question of thread `id` with `value` as typed (issue 30).
    fn answer(&mut self, id: &ThreadId, value: &str) -> Result<String> {
        let store = self.writer()?;
        let row =
            crate::store::threads::thread_by_id_any(&store.read()?, id)?.ok_or_else(|| {
                crate::error::Error::new(
                    crate::error::ErrorCode::UnknownReference,
                    format!("Unknown thread {id}. Repair: select a thread that is listed."),
                )
            })?;
        let (q, answer) = crate::engine::answer::answer_thread(
            store,
            &row,
            &serde_json::Value::String(value.to_string()),
            "top",
        )?;
        Ok(crate::contract::answer::answered_text(
            &row.path, &q, &answer,
        ))
    }

    fn request_stop(&mut self, id: &ThreadId, force: bool) -> Result<()> {
        self.writer()?
            .write(|tx| commands::request(tx, id, CommandKind::stop(force)))
    }

    fn restore(&mut self) -> Result<(usize, usize)> {
        let report =
            crate::engine::restore_dead_owners(self.writer()?, ProcessIdentity::current())?;
        Ok((report.restored.len(), report.killed_groups.len()))
    }
}

/// A group's key: its root session's tree, else (a database before V4) its manager.
fn group_key(r: &Row) -> String {
    match &r.root {
        Some(root) => format!("r:{root}"),
        None => format!("m:{}:{}", r.session, r.contract),
    }
}

/// A closed session's one line: its name (else its id), start, and live and closed counts.
fn folded_label<'a>(info: &forest::RootInfo, rows: impl Iterator<Item = &'a Row>) -> String {
    let (mut live, mut closed, mut gone) = (0, 0, 0);
    for r in rows {
        if r.owner_gone() {
            gone += 1;
        } else if r.live() {
            live += 1;
        } else {
            closed += 1;
        }
    }
    let mut s = match &info.name {
        Some(name) => format!("\"{name}\""),
        None => format!("session {}", info.root_session),
    };
    if let Some(at) = &info.started_at {
        s.push_str(&format!(" · started {}", forest::short_time(at)));
    }
    s.push_str(&format!(" · {live} live {closed} closed"));
    if gone > 0 {
        s.push_str(&format!(" {gone} owner gone"));
    }
    s
}

#[cfg(test)]
mod tests;
