//! `agent_status`: one thread's view, or the list of views the caller may address.

use super::{answer, view, Agents, Engine};
use crate::contract::agent::{self as contract, AgentView};
use crate::engine::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::paths::{self, ROOT};
use crate::store::agents::{self, AgentRow};

/// One view, or (without a path) the bare list of views the caller may address in spawn
/// order: every thread for the root; a child itself and its descendants.
pub(in crate::engine) fn status(e: &Engine, req: contract::Status) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let path = req.path.as_deref();
    let conn = e.store.read()?;
    // The original lists when the path is absent or empty (`params.path ? get : list`).
    if let Some(p) = path.filter(|p| !p.is_empty()) {
        let t = paths::resolve_agent_path(p, e.caller())?;
        e.check_access(&t, true)?;
        if t == ROOT {
            // Only the root reads itself: the original's pseudo-view of the main session.
            return answer(contract::main_session_view(crate::time::now_ms()));
        }
        let row = agents::thread_at_path(&conn, registry, &t)?.ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!("Unknown thread {t}. Repair: run agent_status without a path to list the threads you can address."),
            )
        })?;
        if row.reaped_at.is_some() {
            return Err(super::reaped_error(&t));
        }
        let unreachable = unreachable_of(e, &conn, std::slice::from_ref(&row))?;
        let needs = crate::store::attention::of_thread(&conn, &row.id)?;
        return Ok(Reply::shaped(move |w| {
            let mut v = view(&row);
            v.host_unreachable = unreachable[0].as_ref();
            v.attention = needs.as_ref();
            contract::tool_result(w, &v, false)
        }));
    }
    let rows: Vec<AgentRow> = if e.caller_is_root() {
        agents::threads_all(&conn, registry)?
    } else {
        let (lo, hi) = paths::descendant_range(e.caller());
        agents::threads_under(&conn, registry, e.caller(), &lo, &hi)?
    };
    let unreachable = unreachable_of(e, &conn, &rows)?;
    let needs = crate::store::attention::of_threads(
        &conn,
        &crate::store::ThreadIds::new(rows.iter().map(|r| &r.id))?,
    )?;
    Ok(Reply::shaped(move |w| {
        let views: Vec<AgentView<'_>> = rows
            .iter()
            .zip(&unreachable)
            .zip(&needs)
            .map(|((r, u), n)| AgentView {
                host_unreachable: u.as_ref(),
                attention: n.as_ref(),
                ..view(r)
            })
            .collect();
        contract::tool_result(w, &views, false)
    }))
}

/// Of `rows`, in their order, the live ones held on a host whose lease ran out (issue 33):
/// one query for the live ones, none when none is live or no other host is known
/// (`Store::hosts_to_check`).
fn unreachable_of(
    e: &Engine,
    conn: &crate::store::Conn,
    rows: &[AgentRow],
) -> Result<Vec<Option<crate::store::hosts::Unreachable>>> {
    let mut out = vec![None; rows.len()];
    if !e.store.hosts_to_check() {
        return Ok(out);
    }
    let (live, ids) = crate::store::facts::live_ids(rows.iter().map(|r| (&r.id, r.live)))?;
    if live.is_empty() {
        return Ok(out);
    }
    for (at, u) in live
        .into_iter()
        .zip(crate::store::hosts::unreachable_of(conn, &ids)?)
    {
        out[at] = u;
    }
    Ok(out)
}
