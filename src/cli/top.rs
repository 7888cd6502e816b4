//! `threadbase top`: a terminal view of every manager's thread tree, read from a read-only
//! connection and refreshed only when the database's change counter (`PRAGMA data_version`)
//! moves. The one write it makes is an emergency stop: a `commands` row that the owning `serve`
//! carries out (see `watcher`), on a separate writable connection opened only for that.

use std::collections::{HashMap, HashSet};
use std::io::Stdout;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::{Frame, Terminal};
use rusqlite::Connection;
use serde_json::Value;

use crate::contract::projection::{self, Detail};
use crate::engine::budget::usd;
use crate::error::Result;
use crate::runtime::process::ProcessIdentity;
use crate::store::{events, open_read_only, threads::thread_by_id_any, Store};
use crate::time::{ms_from_iso, now_iso, now_ms};

/// The tokens and cost columns with their separators.
const USAGE_WIDTH: usize = 17;

/// How often the change counter is read (and the longest a key waits to be seen).
const POLL: Duration = Duration::from_millis(200);

/// Runs the terminal UI on `db` until `q`.
pub fn run(db: &Path) -> Result<()> {
    let conn = open_read_only(db)?;
    let mut app = App::new(db.to_path_buf(), conn);
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

/// One thread as the tree shows it.
#[derive(Debug, Clone)]
struct Row {
    id: String,
    session: String,
    contract: String,
    path: String,
    task_name: String,
    name: String,
    status: String,
    phase: String,
    agent_state: Option<String>,
    exit_kind: Option<String>,
    archived: bool,
    hidden: bool,
    created_at: String,
    last_event_at: String,
    owner: Option<ProcessIdentity>,
    /// Every token the thread's messages used, and their cost.
    tokens: i64,
    cost_usd: f64,
    /// The root session of the whole tree it belongs to, across managers (V4's places).
    root: Option<String>,
    /// The thread it hangs under in that tree (possibly in another manager).
    forest_parent: Option<String>,
    /// A contract C worker's run outcome and report verdict (its list status).
    outcome: Option<String>,
    verdict: Option<String>,
}

impl Row {
    fn live(&self) -> bool {
        self.status == "live"
    }

    fn state_text(&self) -> String {
        if self.contract == "agent" {
            if let Some(s) = &self.agent_state {
                return s.clone();
            }
        }
        if self.contract == "worker" {
            // The status the original's terminal UI lists (not part of threads_list).
            return crate::contract::worker::list_status(
                &self.status,
                &self.phase,
                self.verdict.as_deref(),
                self.outcome.as_deref(),
            )
            .to_string();
        }
        let mut s = format!("{}/{}", self.status, self.phase);
        if let Some(k) = &self.exit_kind {
            s.push(' ');
            s.push_str(k);
        }
        s
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateFilter {
    All,
    Live,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visibility {
    Active,
    Archived,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InputKind {
    Search,
    Subtree,
}

/// One line of the tree: a manager header or a thread.
#[derive(Debug, Clone)]
enum Item {
    Manager {
        key: String,
        label: String,
    },
    Thread {
        row: usize,
        depth: usize,
        has_children: bool,
    },
}

struct App {
    db: PathBuf,
    conn: Connection,
    writer: Option<Store>,
    version: Option<i64>,
    rows: Vec<Row>,
    items: Vec<Item>,
    /// The selected item's key (manager key or thread id), kept across reloads.
    selected_key: Option<String>,
    selected: usize,
    scroll: usize,
    state: StateFilter,
    visibility: Visibility,
    subtree: String,
    search: String,
    input: Option<(InputKind, String)>,
    collapsed: HashSet<String>,
    /// A pending stop: (thread id, path, force).
    confirm: Option<(String, String, bool)>,
    message: String,
    help: bool,
    detail: Vec<Line<'static>>,
    counts: (usize, usize),
    /// Each root session's cwd, start and name, for the tree headings.
    roots: HashMap<String, super::forest::RootInfo>,
}

impl App {
    fn new(db: PathBuf, conn: Connection) -> App {
        App {
            db,
            conn,
            writer: None,
            version: None,
            rows: Vec::new(),
            items: Vec::new(),
            selected_key: None,
            selected: 0,
            scroll: 0,
            state: StateFilter::All,
            visibility: Visibility::Active,
            subtree: String::new(),
            search: String::new(),
            input: None,
            collapsed: HashSet::new(),
            confirm: None,
            message: String::new(),
            help: false,
            detail: Vec::new(),
            counts: (0, 0),
            roots: HashMap::new(),
        }
    }

    /// Whether another connection committed since the last reload.
    fn changed(&mut self) -> bool {
        match self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
        {
            Ok(v) => self.version != Some(v),
            Err(_) => false,
        }
    }

    /// Re-reads the threads, rebuilds the tree and the selected thread's detail.
    fn reload(&mut self) {
        self.version = self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .ok();
        match load_rows(&self.conn) {
            Ok(rows) => self.rows = rows,
            Err(e) => self.message = format!("reading the database failed: {}", e.message),
        }
        if let Ok(roots) = super::forest::root_infos(&self.conn) {
            self.roots = roots;
        }
        self.rebuild();
    }

    fn visible(&self, r: &Row) -> bool {
        let state_ok = match self.state {
            StateFilter::All => true,
            StateFilter::Live => r.live(),
            StateFilter::Closed => !r.live(),
        };
        let hidden = r.archived || r.hidden;
        let vis_ok = match self.visibility {
            Visibility::Active => !hidden,
            Visibility::Archived => hidden,
            Visibility::All => true,
        };
        let sub = self.subtree.trim_end_matches('/');
        let sub_ok = sub.is_empty()
            || r.path == sub
            || (r.path.starts_with(sub) && r.path.as_bytes().get(sub.len()) == Some(&b'/'));
        let needle = self.search.to_lowercase();
        let search_ok = needle.is_empty()
            || r.name.to_lowercase().contains(&needle)
            || r.task_name.to_lowercase().contains(&needle);
        state_ok && vis_ok && sub_ok && search_ok
    }

    /// Builds the items from the rows: one tree per root session (a child's own manager's
    /// threads nested under the thread whose session it is), threads under their nearest shown
    /// ancestor, live before closed within a parent, otherwise in path order.
    fn rebuild(&mut self) {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let (mut live, mut closed) = (0, 0);
        for (i, r) in self.rows.iter().enumerate() {
            if !self.visible(r) {
                continue;
            }
            if r.live() {
                live += 1;
            } else {
                closed += 1;
            }
            let key = match &r.root {
                Some(root) => format!("r:{root}"),
                None => format!("m:{}:{}", r.session, r.contract),
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(i),
                None => groups.push((key, vec![i])),
            }
        }
        self.counts = (live, closed);
        // Forest parents of every row, shown or not, so a hidden parent is walked past.
        let forest_parent: HashMap<&str, &str> = self
            .rows
            .iter()
            .filter_map(|r| Some((r.id.as_str(), r.forest_parent.as_deref()?)))
            .collect();
        let mut items = Vec::new();
        for (key, members) in &groups {
            let first = &self.rows[members[0]];
            let label =
                match &first.root {
                    Some(root) => {
                        let info = self.roots.get(root).cloned().unwrap_or_else(|| {
                            super::forest::RootInfo {
                                root_session: root.clone(),
                                ..Default::default()
                            }
                        });
                        super::forest::heading_of(&info, members.len())
                    }
                    None => format!(
                        "manager {} ({}) · {} thread{}",
                        first.session,
                        first.contract,
                        members.len(),
                        if members.len() == 1 { "" } else { "s" }
                    ),
                };
            items.push(Item::Manager {
                key: key.clone(),
                label,
            });
            if self.collapsed.contains(key) {
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
                        cur = forest_parent.get(id).copied();
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
        self.detail = match self.selected_row().map(|r| r.id.clone()) {
            None => match self.items.get(self.selected) {
                Some(Item::Manager { label, .. }) => vec![Line::from(label.clone())],
                _ => vec![Line::from("(no threads match the filters)")],
            },
            Some(id) => match thread_snapshot(&self.conn, &id) {
                Ok(Some(snap)) => {
                    let mut lines = detail_lines(&snap);
                    lines.splice(3..3, usage_lines(&self.conn, &id));
                    lines
                }
                Ok(None) => vec![Line::from(format!("{id}: gone"))],
                Err(e) => vec![Line::from(format!("reading {id} failed: {}", e.message))],
            },
        };
    }

    /// Handles one key; true to quit.
    fn key(&mut self, k: KeyEvent) -> bool {
        if let Some((kind, mut buf)) = self.input.take() {
            match k.code {
                KeyCode::Enter => {
                    match kind {
                        InputKind::Search => self.search = buf,
                        InputKind::Subtree => self.subtree = buf,
                    }
                    self.reload();
                }
                KeyCode::Esc => {
                    match kind {
                        InputKind::Search => self.search.clear(),
                        InputKind::Subtree => self.subtree.clear(),
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
                match self.request_stop(&id, force) {
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
            KeyCode::Enter | KeyCode::Char(' ') => {
                if let Some(key) = self.items.get(self.selected).and_then(|it| match it {
                    Item::Thread {
                        has_children: false,
                        ..
                    } => None,
                    it => self.item_key(it),
                }) {
                    if !self.collapsed.remove(&key) {
                        self.collapsed.insert(key);
                    }
                    self.rebuild();
                }
            }
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
                    Visibility::Active => Visibility::Archived,
                    Visibility::Archived => Visibility::All,
                    Visibility::All => Visibility::Active,
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

    fn ask_stop(&mut self, force: bool) {
        let Some(r) = self.selected_row().cloned() else {
            self.message = "select a thread to stop".to_string();
            return;
        };
        if !r.live() {
            self.message = format!("{} is already closed", r.path);
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

    fn request_stop(&mut self, id: &str, force: bool) -> Result<()> {
        let kind = if force { "force_stop" } else { "stop" };
        self.writer()?.write(|tx| {
            tx.execute(
                include_str!("../../sql/top_command_insert.sql"),
                rusqlite::params![id, kind, now_iso()],
            )?;
            Ok(())
        })
    }

    fn restore(&mut self) -> Result<(usize, usize)> {
        let report =
            crate::engine::restore_dead_owners(self.writer()?, ProcessIdentity::current())?;
        Ok((report.restored.len(), report.killed_groups.len()))
    }

    fn draw(&mut self, f: &mut Frame<'_>) {
        let area = f.area();
        let tree_h = (area.height.saturating_sub(2) * 9 / 20).max(3);
        let [head, tree, detail, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(tree_h),
            Constraint::Min(0),
            Constraint::Length(1),
        ])
        .areas(area);
        f.render_widget(Paragraph::new(self.header_line(head.width)), head);
        self.draw_tree(f, tree);
        let block = Block::default()
            .borders(Borders::TOP)
            .title(" detail (poll, tail) ");
        f.render_widget(
            Paragraph::new(self.detail.clone())
                .block(block)
                .wrap(Wrap { trim: false }),
            detail,
        );
        f.render_widget(Paragraph::new(self.footer_line()), foot);
        if self.help {
            draw_help(f, area);
        }
    }

    fn header_line(&self, width: u16) -> Line<'static> {
        let state = match self.state {
            StateFilter::All => "all",
            StateFilter::Live => "live",
            StateFilter::Closed => "closed",
        };
        let vis = match self.visibility {
            Visibility::Active => "active",
            Visibility::Archived => "archived",
            Visibility::All => "all",
        };
        let mut s = format!(
            "threadbase top  {} live {} closed  state:{state} vis:{vis}",
            self.counts.0, self.counts.1
        );
        if !self.subtree.is_empty() {
            s.push_str(&format!(" under:{}", self.subtree));
        }
        if !self.search.is_empty() {
            s.push_str(&format!(" search:{}", self.search));
        }
        Line::from(Span::styled(
            fit(&s, width as usize),
            Style::default().add_modifier(Modifier::BOLD),
        ))
    }

    fn footer_line(&self) -> Line<'static> {
        if let Some((kind, buf)) = &self.input {
            let label = match kind {
                InputKind::Search => "search names",
                InputKind::Subtree => "subtree path",
            };
            return Line::from(format!("{label}: {buf}_  (Enter applies, Esc clears)"));
        }
        if !self.message.is_empty() {
            return Line::from(Span::styled(
                self.message.clone(),
                Style::default().fg(Color::Yellow),
            ));
        }
        Line::from("j/k move  Enter fold  f state  v vis  / search  p path  s stop  ? help  q quit")
    }

    fn draw_tree(&mut self, f: &mut Frame<'_>, area: Rect) {
        let h = area.height as usize;
        if h == 0 {
            return;
        }
        let body = h.saturating_sub(1);
        if self.selected < self.scroll {
            self.scroll = self.selected;
        } else if body > 0 && self.selected >= self.scroll + body {
            self.scroll = self.selected + 1 - body;
        }
        let cols = Columns::for_width(area.width as usize);
        let mut lines = vec![Line::from(Span::styled(
            cols.header(),
            Style::default().add_modifier(Modifier::UNDERLINED),
        ))];
        let now = now_ms();
        for (i, it) in self.items.iter().enumerate().skip(self.scroll).take(body) {
            let text = match it {
                Item::Manager { key, label } => {
                    let mark = if self.collapsed.contains(key) {
                        "▸ "
                    } else {
                        "▾ "
                    };
                    fit(&format!("{mark}{label}"), cols.width)
                }
                Item::Thread {
                    row,
                    depth,
                    has_children,
                } => {
                    let r = &self.rows[*row];
                    let mark = match (has_children, self.collapsed.contains(&r.id)) {
                        (false, _) => "  ",
                        (true, true) => "▸ ",
                        (true, false) => "▾ ",
                    };
                    let tree = format!("{}{mark}{}", "  ".repeat(depth + 1), r.path);
                    cols.row(&tree, r, now)
                }
            };
            let mut style = match it {
                Item::Manager { .. } => Style::default().add_modifier(Modifier::BOLD),
                Item::Thread { row, .. } if !self.rows[*row].live() => {
                    Style::default().fg(Color::DarkGray)
                }
                _ => Style::default(),
            };
            if i == self.selected {
                style = style.add_modifier(Modifier::REVERSED);
            }
            lines.push(Line::from(Span::styled(text, style)));
        }
        f.render_widget(Paragraph::new(lines), area);
    }
}

/// The tree's columns at one width: narrower terminals drop name, then ages.
struct Columns {
    width: usize,
    name: usize,
    age: bool,
    state: usize,
    /// Tokens and cost (from 100 columns on).
    usage: bool,
}

impl Columns {
    fn for_width(width: usize) -> Columns {
        Columns {
            width,
            name: if width >= 80 { 16 } else { 0 },
            age: width >= 56,
            state: match width {
                90.. => 20,
                40..=89 => 16,
                _ => 0,
            },
            usage: width >= 100,
        }
    }

    fn path_width(&self) -> usize {
        let mut w = self.width;
        if self.name > 0 {
            w = w.saturating_sub(self.name + 1);
        }
        if self.state > 0 {
            w = w.saturating_sub(self.state + 1);
        }
        if self.age {
            w = w.saturating_sub(12);
        }
        if self.usage {
            w = w.saturating_sub(USAGE_WIDTH);
        }
        w
    }

    #[allow(clippy::too_many_arguments)]
    fn join(
        &self,
        path: &str,
        name: &str,
        state: &str,
        age: &str,
        last: &str,
        tokens: &str,
        cost: &str,
    ) -> String {
        let mut s = fit(path, self.path_width());
        if self.name > 0 {
            s.push(' ');
            s.push_str(&fit(name, self.name));
        }
        if self.state > 0 {
            s.push(' ');
            s.push_str(&fit(state, self.state));
        }
        if self.age {
            s.push_str(&format!(" {age:>5} {last:>5}"));
        }
        if self.usage {
            s.push_str(&format!(" {tokens:>7} {cost:>8}"));
        }
        fit(&s, self.width)
    }

    fn header(&self) -> String {
        self.join("PATH", "NAME", "STATE", "AGE", "LAST", "TOKENS", "COST")
    }

    fn row(&self, tree: &str, r: &Row, now: i64) -> String {
        self.join(
            tree,
            &r.name,
            &r.state_text(),
            &ago(&r.created_at, now),
            &ago(&r.last_event_at, now),
            &super::usage::compact(r.tokens),
            &usd(r.cost_usd),
        )
    }
}

/// Pads or cuts `s` to exactly `w` characters.
fn fit(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        format!("{s}{}", " ".repeat(w - n))
    } else if w == 0 {
        String::new()
    } else {
        let mut out: String = s.chars().take(w - 1).collect();
        out.push('…');
        out
    }
}

/// A short age: `42s`, `5m`, `3h`, `2d`.
fn ago(iso: &str, now: i64) -> String {
    let Some(ms) = ms_from_iso(iso) else {
        return "?".to_string();
    };
    let s = (now - ms).max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn draw_help(f: &mut Frame<'_>, area: Rect) {
    let text = [
        "threadbase top: keys",
        "",
        "  ↑ ↓ / j k    move the selection (PgUp/PgDn, g/G)",
        "  Enter        expand or collapse a manager or thread",
        "  f            state filter: all → live → closed",
        "  v            visibility: active → archived → all",
        "  /            search names and task names",
        "  p            show one subtree (type a path)",
        "  Esc          clear search and subtree",
        "  s / S        stop / force-stop the thread (y confirms)",
        "  r            restore pass for threads whose owner is gone",
        "  ?            this help        q  quit",
    ];
    let w = (text.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u16 + 4).min(area.width);
    let h = (text.len() as u16 + 2).min(area.height);
    let rect = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, rect);
    let lines: Vec<Line> = text.iter().map(|l| Line::from(*l)).collect();
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL)),
        rect,
    );
}

fn load_rows(conn: &Connection) -> Result<Vec<Row>> {
    let mut stmt = conn.prepare_cached(include_str!("../../sql/top_threads.sql"))?;
    let rows = stmt.query_map([], |r| {
        let owner_pid: Option<i64> = r.get(15)?;
        let owner_started: Option<i64> = r.get(16)?;
        Ok(Row {
            id: r.get(0)?,
            session: r.get(1)?,
            contract: r.get(2)?,
            path: r.get(3)?,
            task_name: r.get(5)?,
            name: r.get(6)?,
            status: r.get(7)?,
            phase: r.get(8)?,
            agent_state: r.get(9)?,
            exit_kind: r.get(10)?,
            archived: r.get(11)?,
            hidden: r.get::<_, Option<bool>>(12)?.unwrap_or(false),
            created_at: r.get(13)?,
            last_event_at: r.get(14)?,
            owner: owner_pid
                .zip(owner_started)
                .map(|(pid, started_at)| ProcessIdentity { pid, started_at }),
            tokens: 0,
            cost_usd: 0.0,
            root: None,
            forest_parent: None,
            outcome: r.get(17)?,
            verdict: r.get(18)?,
        })
    })?;
    let mut rows = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    if crate::store::usage::has_tables(conn)? {
        let mut stmt = conn.prepare_cached(include_str!("../../sql/top_places.sql"))?;
        let places: HashMap<String, (String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?
            .collect::<rusqlite::Result<_>>()?;
        for r in &mut rows {
            if let Some((root, parent)) = places.get(&r.id) {
                r.root = Some(root.clone());
                r.forest_parent = parent.clone();
            }
        }
    }
    let spent = crate::store::usage::all_if_any(conn)?;
    for r in &mut rows {
        if let Some(u) = spent.get(&r.id) {
            r.tokens = u.total_tokens();
            r.cost_usd = u.cost_usd;
        }
    }
    Ok(rows)
}

/// The `poll` projection of one thread at `tail` detail.
fn thread_snapshot(conn: &Connection, id: &str) -> Result<Option<Value>> {
    let Some(row) = thread_by_id_any(conn, id)? else {
        return Ok(None);
    };
    let out = crate::engine::output_facts(conn, id)?;
    let evs = events::rows_of_thread(conn, id)?;
    Ok(Some(projection::snapshot(&row, &out, &evs, Detail::Tail)))
}

/// What the thread spent, and its subtree across every manager of its tree.
fn usage_lines(conn: &Connection, id: &str) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if !crate::store::usage::has_tables(conn).unwrap_or(false) {
        return out;
    }
    if let Ok(Some(u)) = crate::store::usage::of_thread(conn, id) {
        out.push(Line::from(format!("usage: {}", super::usage::summary(&u))));
    }
    if let Ok(Some(s)) = crate::store::usage::of_subtree(conn, id) {
        out.push(Line::from(format!(
            "subtree: {} thread{} · {} tokens · {}",
            s.threads,
            if s.threads == 1 { "" } else { "s" },
            crate::engine::budget::thousands(s.usage.total_tokens()),
            usd(s.usage.cost_usd)
        )));
    }
    out
}

fn detail_lines(s: &Value) -> Vec<Line<'static>> {
    let t = |k: &str| s[k].as_str().unwrap_or("").to_string();
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut out = vec![
        Line::from(vec![
            Span::styled(t("path"), bold),
            Span::raw(format!("  {}", t("id"))),
        ]),
        Line::from(format!(
            "{} · task {} · {}/{}{}{}",
            t("name"),
            t("taskName"),
            t("status"),
            t("phase"),
            s["exit"]["kind"]
                .as_str()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default(),
            s["pid"]
                .as_i64()
                .map(|p| format!(" · pid {p}"))
                .unwrap_or_default(),
        )),
        Line::from(format!(
            "result ({}): {}",
            s["result"]["status"].as_str().unwrap_or("none"),
            s["resultSummary"].as_str().unwrap_or("-")
        )),
    ];
    if let Some(evs) = s["recentEvents"].as_array() {
        out.push(Line::styled("recent events", bold));
        for e in evs.iter().rev().take(5).rev() {
            let at = e["at"].as_str().unwrap_or("");
            let time = at.get(11..19).unwrap_or(at);
            let extra = ["text", "message", "phase", "reason"]
                .iter()
                .find_map(|k| e[*k].as_str())
                .map(|x| format!(" {}", x.replace('\n', " ")))
                .unwrap_or_default();
            out.push(Line::from(format!(
                "  {time} {}{extra}",
                e["type"].as_str().unwrap_or("?")
            )));
        }
    }
    for (key, label, keep) in [
        ("outputTail", "output tail", 6),
        ("stderrTail", "stderr tail", 4),
    ] {
        if let Some(text) = s[key].as_str().filter(|x| !x.is_empty()) {
            out.push(Line::styled(label, bold));
            let lines: Vec<&str> = text.lines().collect();
            for l in &lines[lines.len().saturating_sub(keep)..] {
                out.push(Line::from(format!("  {l}")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    /// A contract C worker's row shows the list status the original's terminal UI shows
    /// (threads_list itself returns only `{workers}`); other contracts keep theirs.
    #[test]
    fn worker_rows_show_their_list_status() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path().join("t.sqlite")).unwrap();
        store
            .write(|tx| {
                let m = upsert_manager(
                    tx,
                    &ManagerSpec {
                        session_id: "ses_coord",
                        contract: Contract::Worker,
                        scope_path: "/root",
                        depth: 0,
                        self_thread_id: None,
                        session_file: None,
                        cwd: None,
                        owner_pid: None,
                        owner_started_at: None,
                    },
                )?;
                for (id, status, phase) in [
                    ("ses_busy", "live", "busy"),
                    ("ses_new", "live", "starting"),
                    ("ses_done", "live", "idle"),
                    ("ses_pass", "live", "idle"),
                    ("ses_gone", "live", "idle"),
                ] {
                    insert_thread(
                        tx,
                        &NewThread {
                            id: id.into(),
                            manager_id: m,
                            path: format!("/root/{id}"),
                            parent_path: Some("/root".into()),
                            task_name: id.into(),
                            name: id.into(),
                            depth: 1,
                            cwd: "/w".into(),
                            status,
                            phase,
                            ..Default::default()
                        },
                    )?;
                }
                tx.execute_batch(
                    "UPDATE threads SET outcome = 'succeeded' WHERE id IN ('ses_done', 'ses_pass');
                     UPDATE threads SET status = 'closed', exit_kind = 'stopped'
                     WHERE id IN ('ses_pass', 'ses_gone');
                     INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
                     VALUES ('ses_pass', 'PASS WITH NOTES', 'ok', '[]', 'msg_1', '2026-01-01T00:00:00.000Z');",
                )?;
                Ok(())
            })
            .unwrap();
        let conn = store.read().unwrap();
        let rows = load_rows(&conn).unwrap();
        let status: Vec<(String, String)> = rows
            .iter()
            .map(|r| (r.id.clone(), r.state_text()))
            .collect();
        let want = [
            ("ses_busy", "running"),
            ("ses_done", "no report"),
            ("ses_gone", "interrupted"),
            ("ses_new", "starting"),
            ("ses_pass", "PASS WITH NOTES"),
        ];
        for (id, s) in want {
            assert!(
                status.iter().any(|(i, t)| i == id && t == s),
                "{id}: {s} in {status:?}"
            );
        }
    }
}
