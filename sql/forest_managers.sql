-- Every manager's session and contract, for the per-manager fallback of `tree` on a
-- database without thread_places (before V4). Managers are few: a full read.
SELECT {forest_manager_row} FROM managers
