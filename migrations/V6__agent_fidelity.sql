-- threadbase schema, version 6: contract B's list in spawn order.

-- Why: agent_status without a path lists a registry's threads in spawn order, as the original's
-- Map does; rowid is insertion order, and this index holds one registry's rowids in that order,
-- so the list is one index range with no sort step. Partial (contract B rows only), so inserts
-- of the other contracts' threads do not pay for it.
CREATE INDEX threads_agent_by_manager ON threads (manager_id) WHERE agent_state IS NOT NULL;
