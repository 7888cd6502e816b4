//! Which threads a CLI view covers: `--session ID|NAME|latest` and `--manager`, resolved once
//! before anything is read (`list`, `tree`, `show`, `events`, `usage`).

use crate::error::Result;
use crate::store::threads::ThreadRow;
use crate::store::Conn;

/// The session `--session` names (resolved before anything is listed), if given.
pub fn selected_session(
    conn: &Conn,
    selector: Option<&str>,
) -> Result<Option<crate::store::sessions::SessionInfo>> {
    selector
        .map(|s| crate::store::sessions::select(conn, s))
        .transpose()
}

/// Which threads a reference is resolved among: one manager's (`--manager`, the older
/// spelling), one Pi session's (`--session`), or every thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Within<'a> {
    pub manager: Option<&'a str>,
    pub session: Option<&'a str>,
}

impl Within<'_> {
    /// The thread `reference` names among these threads.
    pub fn resolve(&self, conn: &Conn, reference: &str) -> Result<ThreadRow> {
        let session = selected_session(conn, self.session)?;
        crate::store::refs::resolve_anywhere(conn, reference, self.manager, session.as_ref())
    }
}
