-- Reference resolution step 3 past the manager's own threads: threads whose task name (always
-- the path basename) is :name in the contract A managers below :manager (walked down
-- managers_by_parent), one threads_by_task_name search per reached manager; in list order,
-- LIMIT keeps an ambiguity report bounded.
WITH RECURSIVE reach (id) AS (
    SELECT m.id FROM managers m WHERE m.parent_manager_id = :manager AND m.contract = 'thread'
    UNION
    SELECT m.id FROM reach r
    JOIN managers m ON m.parent_manager_id = r.id AND m.contract = 'thread'
)
SELECT {thread_row}
FROM reach r CROSS JOIN threads t ON t.manager_id = r.id AND t.task_name = :name
ORDER BY t.sort_key
LIMIT :limit
