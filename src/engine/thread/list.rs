//! `list`: the filter's target resolved to a subtree, then the listing (engine/listing.rs).

use super::{scope, Engine};
use crate::contract::thread::ListTarget;
use crate::error::Result;
use crate::serve::output::Reply;
use crate::store::list::{ListQuery, Subtree};
use crate::store::refs::resolve_list_filter;

pub(super) fn list_threads(
    e: &Engine,
    state: crate::store::list::StateFilter,
    visibility: crate::store::list::VisibilityFilter,
    target: Option<ListTarget>,
) -> Result<Reply> {
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
