//! `threadbase budget [show|set|clear]`: the budgets kept in the database (issue 33,
//! `store::budgets`), which every serve of every host sharing it applies in the transaction
//! that reserves new work.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::engine::budget::{parse_tokens, parse_turns, parse_usd, thousands, usd, Budget};
use crate::error::{Error, Result};
use crate::store::budgets::{self, Kept, Scope};

/// `budget` / `budget show`: each scope's caps, the whole database's spend, and this
/// process's environment caps.
pub fn show(db: &Path, json: bool, out: &mut dyn Write) -> Result<()> {
    let conn = crate::store::open_read_only(db)?;
    let (kept, team) = if budgets::has_table(&conn)? && crate::store::usage::has_tables(&conn)? {
        (budgets::read(&conn)?, Some(budgets::team_spend(&conn)?))
    } else {
        (Default::default(), None)
    };
    let env = Budget::from_env(&|k| std::env::var(k).ok())?;
    if json {
        let doc = json!({
            "team": kept.team,
            "tree": kept.tree,
            "thread": kept.thread,
            "teamSpend": team,
            "env": {"tokens": env.tokens, "usd": env.usd},
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let spent = team.unwrap_or_default();
    writeln!(
        out,
        "team budget: {}",
        match &kept.team {
            Some(k) => caps_text(k),
            None =>
                "none (`threadbase budget set --scope team --tokens N` caps the whole database)"
                    .to_string(),
        }
    )?;
    writeln!(
        out,
        "  spent across every host: {} tokens · {} ({} tree{}, {} thread{} and the sessions' own turns){}",
        thousands(spent.usage.total_tokens()),
        usd(spent.usage.cost_usd),
        spent.trees,
        if spent.trees == 1 { "" } else { "s" },
        spent.threads,
        if spent.threads == 1 { "" } else { "s" },
        match &kept.team {
            Some(k) if reached(k, &spent.usage) => " · REACHED: new work is refused on every host",
            _ => "",
        }
    )?;
    writeln!(
        out,
        "tree budget: {}",
        match &kept.tree {
            Some(k) => format!("{} on each root session's whole tree", caps_text(k)),
            None =>
                "none (`threadbase budget set --scope tree --tokens N` caps each tree)".to_string(),
        }
    )?;
    writeln!(
        out,
        "thread budget: {}",
        match &kept.thread {
            Some(k) => format!("{} on each thread", caps_text(k)),
            None => "none (`threadbase budget set --scope thread --tokens N` caps each thread)"
                .to_string(),
        }
    )?;
    let mut env_caps = Vec::new();
    if let Some(t) = env.tokens {
        env_caps.push(format!(
            "{}={}",
            crate::engine::budget::TOKENS_VAR,
            thousands(t)
        ));
    }
    if let Some(u) = env.usd {
        env_caps.push(format!("{}={}", crate::engine::budget::USD_VAR, usd(u)));
    }
    for (var, cap) in env.thread.named_env() {
        env_caps.push(format!("{var}={cap}"));
    }
    writeln!(
        out,
        "this environment: {} (a serve started with it caps each tree it serves too; the lower cap is reached first; `threadbase usage` shows each tree's spend)",
        if env_caps.is_empty() {
            "no THREADBASE_BUDGET_* or THREADBASE_THREAD_* cap".to_string()
        } else {
            env_caps.join(" · ")
        }
    )?;
    Ok(())
}

fn caps_text(k: &Kept) -> String {
    let mut caps = Vec::new();
    if let Some(t) = k.tokens {
        caps.push(format!("{} tokens", thousands(t)));
    }
    if let Some(u) = k.usd {
        caps.push(usd(u));
    }
    if let Some(t) = k.turns {
        caps.push(format!(
            "{} turn{}",
            thousands(t),
            if t == 1 { "" } else { "s" }
        ));
    }
    format!(
        "{} (set {} on host {})",
        caps.join(" · "),
        k.set_at,
        k.set_by
    )
}

fn reached(k: &Kept, u: &crate::store::usage::Usage) -> bool {
    k.tokens.is_some_and(|t| u.total_tokens() >= t) || k.usd.is_some_and(|c| u.cost_usd >= c)
}

fn scope_of(raw: &str) -> Result<Scope> {
    Scope::parse(raw.trim()).ok_or_else(|| {
        Error::invalid(format!(
            "--scope must be `tree` (each root session's whole tree), `team` (the whole database) or `thread` (each thread), got {}. Repair: pass --scope tree, --scope team or --scope thread.",
            crate::paths::json_quote(raw)
        ))
    })
}

/// The caps `budget set` was given, as typed.
#[derive(Debug, Clone, Copy, Default)]
pub struct CapArgs<'a> {
    pub tokens: Option<&'a str>,
    pub usd: Option<&'a str>,
    pub turns: Option<&'a str>,
}

/// `budget set --scope S [--tokens N] [--usd X] [--turns N]`: replaces the scope's caps.
/// Checks every argument before it writes anything.
pub fn set(
    db: &Path,
    scope: &str,
    args: CapArgs<'_>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let scope = scope_of(scope)?;
    let tokens = match args.tokens {
        None => None,
        Some(raw) => Some(parse_tokens(raw).ok_or_else(|| {
            Error::invalid(format!(
                "--tokens must be a whole number of tokens, such as 2000000 (got {}). Repair: pass a number of tokens; nothing was changed.",
                crate::paths::json_quote(raw)
            ))
        })?),
    };
    let usd_cap = match args.usd {
        None => None,
        Some(raw) => Some(parse_usd(raw).ok_or_else(|| {
            Error::invalid(format!(
                "--usd must be a non-negative amount of US dollars, such as 25 or 2.50 (got {}). Repair: pass an amount; nothing was changed.",
                crate::paths::json_quote(raw)
            ))
        })?),
    };
    let turns = match args.turns {
        None => None,
        Some(_) if scope != Scope::Thread => {
            return Err(Error::invalid(format!(
                "--turns caps a thread's turns, so it goes with --scope thread only (got --scope {}). Repair: `threadbase budget set --scope thread --turns N`; nothing was changed.",
                scope.as_str()
            )))
        }
        Some(raw) => Some(parse_turns(raw).ok_or_else(|| {
            Error::invalid(format!(
                "--turns must be a whole number of turns above 0, such as 20 (got {}). Repair: pass a number of turns; nothing was changed.",
                crate::paths::json_quote(raw)
            ))
        })?),
    };
    if tokens.is_none() && usd_cap.is_none() && turns.is_none() {
        let turns_too = if scope == Scope::Thread {
            ", --turns N"
        } else {
            ""
        };
        return Err(Error::invalid(format!(
            "budget set needs a cap: --tokens N, --usd DOLLARS{turns_too} or several. Repair: e.g. `threadbase budget set --scope {} --tokens 2000000`; `threadbase budget clear --scope {}` removes the caps instead. Nothing was changed.",
            scope.as_str(),
            scope.as_str()
        )));
    }
    let caps = budgets::Caps {
        tokens,
        usd: usd_cap,
        turns,
    };
    let store = crate::Store::open_existing(db)?;
    let at = crate::time::now_iso();
    let by = crate::host::HostIdentity::here().host_id.clone();
    store.write(|tx| budgets::put(tx, scope, caps, &at, &by))?;
    let kept = budgets::read(&store.read()?)?;
    let k = match scope {
        Scope::Tree => kept.tree,
        Scope::Team => kept.team,
        Scope::Thread => kept.thread,
    };
    if json {
        writeln!(out, "{}", json!({ "budget": k }))?;
    } else if let Some(k) = k {
        writeln!(
            out,
            "{} budget set: {}; every serve of every host applies it {} from now on",
            scope.as_str(),
            caps_text(&k),
            match scope {
                Scope::Thread =>
                    "to every thread it runs (a wrap-up, then the stop) and every resume and send",
                _ => "to new work and to the threads it runs",
            }
        )?;
    }
    Ok(())
}

/// `budget clear --scope S`.
pub fn clear(db: &Path, scope: &str, json: bool, out: &mut dyn Write) -> Result<()> {
    let scope = scope_of(scope)?;
    let store = crate::Store::open_existing(db)?;
    let had = store.write(|tx| budgets::clear(tx, scope))?;
    if json {
        writeln!(out, "{}", json!({ "scope": scope, "cleared": had }))?;
    } else if had {
        writeln!(
            out,
            "{} budget cleared: no cap of this scope",
            scope.as_str()
        )?;
    } else {
        writeln!(
            out,
            "{} budget: there was none; nothing changed",
            scope.as_str()
        )?;
    }
    Ok(())
}
