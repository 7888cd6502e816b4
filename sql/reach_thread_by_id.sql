-- Reference resolution step 1 past the manager's own threads: a thread id held by a contract A
-- manager below :manager (a child's own serve, its children's, …). `reach` walks down
-- managers_by_parent from :manager, one index search per manager below it; the thread is then
-- a primary-key lookup, kept if its manager was reached.
WITH RECURSIVE reach (id) AS (
    SELECT m.id FROM managers m WHERE m.parent_manager_id = :manager AND m.contract = 'thread'
    UNION
    SELECT m.id FROM reach r
    JOIN managers m ON m.parent_manager_id = r.id AND m.contract = 'thread'
)
SELECT {thread_row}
FROM threads t
WHERE t.id = :id AND t.manager_id IN (SELECT id FROM reach)
