//! Drawing top: the header, the tree in columns that narrow with the terminal, the detail of
//! the selected thread, the footer and the help. Reads the app's state, never the database.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::app::{App, InputKind, Item};
use super::data::Row;
use crate::cli::usage;
use crate::engine::budget::usd;
use crate::time::{ms_from_iso, now_ms};

/// The tokens and cost columns with their separators.
const USAGE_WIDTH: usize = 17;

impl App {
    pub(super) fn draw(&mut self, f: &mut Frame<'_>) {
        let area = f.area();
        // The tree takes 45% of the rows between header and footer, and up to 60% when it has
        // the lines to fill them (older sessions are a line each: several fit at 80×24).
        let rows = area.height.saturating_sub(2);
        let want = u16::try_from(self.items.len() + 1).unwrap_or(u16::MAX);
        let tree_h = want.min(rows * 3 / 5).max(rows * 9 / 20).max(3);
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
        let (state, vis) = (self.state.as_str(), self.visibility.as_str());
        let mut s = format!(
            "threadbase top  {} live {} closed",
            self.counts.0, self.counts.1
        );
        if self.counts.2 > 0 {
            s.push_str(&format!(" {} owner gone", self.counts.2));
        }
        s.push_str(&format!("  state:{state} vis:{vis}"));
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
                InputKind::Answer(_) => "answer (yes/no, an option, or text)",
            };
            return Line::from(format!("{label}: {buf}_  (Enter applies, Esc clears)"));
        }
        if !self.message.is_empty() {
            return Line::from(Span::styled(
                self.message.clone(),
                Style::default().fg(Color::Yellow),
            ));
        }
        Line::from(
            "Enter fold  e session  f state  v vis  / search  p path  s stop  ? help  q quit",
        )
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
        let cols = Columns::for_width(area.width as usize, self.team);
        let mut lines = vec![Line::from(Span::styled(
            cols.header(),
            Style::default().add_modifier(Modifier::UNDERLINED),
        ))];
        let now = now_ms();
        for (i, it) in self.items.iter().enumerate().skip(self.scroll).take(body) {
            let text = match it {
                Item::Manager { label, open, .. } => {
                    let mark = if *open { "▾ " } else { "▸ " };
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
    /// The host (a team database, from 72 columns on).
    host: usize,
    /// Tokens and cost (from 100 columns on).
    usage: bool,
}

impl Columns {
    fn for_width(width: usize, team: bool) -> Columns {
        Columns {
            width,
            host: if team && width >= 72 { 12 } else { 0 },
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
        if self.host > 0 {
            w = w.saturating_sub(self.host + 1);
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
        host: &str,
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
        if self.host > 0 {
            s.push(' ');
            s.push_str(&fit(host, self.host));
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
        self.join(
            "PATH", "NAME", "STATE", "HOST", "AGE", "LAST", "TOKENS", "COST",
        )
    }

    fn row(&self, tree: &str, r: &Row, now: i64) -> String {
        self.join(
            tree,
            &r.name,
            &r.state_text(),
            r.host.as_deref().unwrap_or("-"),
            &ago(&r.created_at, now),
            &ago(&r.last_event_at, now),
            &usage::compact(r.tokens),
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
        "  Enter        expand or collapse a session or thread",
        "  e            expand or collapse the selected line's session",
        "  f            state filter: all → live → closed",
        "  v            visibility: active → archived → all",
        "  /            search names and task names",
        "  p            show one subtree (type a path)",
        "  Esc          clear search and subtree",
        "  s / S        stop / force-stop the thread (y confirms)",
        "  a            answer the thread's pending question (THREADBASE_UI=parent)",
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
