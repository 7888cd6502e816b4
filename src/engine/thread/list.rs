//! `list`: the filter's target resolved to a subtree, then the listing (engine/listing.rs).

use super::{scope, Engine};
use crate::contract::thread::ListTarget;
use crate::error::Result;
use crate::serve::output::Reply;
use crate::store::list::{ListQuery, Subtree};
use crate::store::refs::resolve_list_filter;

pub(in crate::engine) fn list(e: &Engine, req: crate::contract::thread::List) -> Result<Reply> {
    let crate::contract::thread::List {
        state,
        visibility,
        target,
    } = req;
    let subtree = {
        let conn = e.store.read()?;
        match target {
            Some(ListTarget::Parent(p)) => {
                Subtree::ChildrenOf(resolve_list_filter(&conn, scope(e), &p)?)
            }
            Some(ListTarget::Ancestor(a)) => {
                Subtree::DescendantsOf(resolve_list_filter(&conn, scope(e), &a)?)
            }
            None => Subtree::Everything,
        }
    };
    crate::engine::listing::reply(
        e,
        ListQuery {
            state,
            visibility,
            subtree,
        },
    )
}
