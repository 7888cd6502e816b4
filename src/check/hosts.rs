//! `check`'s look at the hosts (issue 46): a host id that serves of more than one machine or
//! PID space hold at once, each with a heartbeat that has not lapsed. Each would take the
//! other's threads for its own; a serve refuses to start into such a collision, so one found
//! here started before that check existed, or two started at the same instant.

use super::{Checker, Problem, Severity};

impl Checker<'_> {
    pub(super) fn host_collisions(&mut self) {
        let found = match crate::store::hosts::collisions(self.conn) {
            Ok(found) => found,
            Err(e) => return self.failed("host_id_collision", e),
        };
        for c in found {
            let host = &c.host_id;
            let what = if c.boots > 1 {
                format!("{} machines (boots)", c.boots)
            } else {
                format!("{} PID spaces of one machine", c.spaces)
            };
            self.push(Problem {
                check: "host_id_collision",
                severity: Severity::Error,
                message: format!(
                    "Host id {host} is held at once by serves of {what}, each with a heartbeat within the lease: it is not unique, and each side would take the other's threads for its own."
                ),
                repair: format!(
                    "Give each machine or container a host id of its own: set {}=<unique name> in the environment its Pi sessions start from, then restart their serves (`threadbase host list` shows the hosts).",
                    crate::host::HOST_ID_VAR
                ),
            });
        }
    }
}
