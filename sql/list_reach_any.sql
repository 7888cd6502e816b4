-- Whether any contract A manager sits right below :manager (a child's own serve, which holds
-- that child's children). Without one, a `parent` / `ancestor` list skips its second statement
-- (sql/list_*_reach.sql), whose recursive walk opens and frees temporary tables even when it
-- finds nothing: about 40k of the 275k instructions a `list parent` of 10 costs in serve
-- (callgrind). One search of managers_by_parent.
SELECT EXISTS (
    SELECT 1 FROM managers m
    WHERE m.parent_manager_id = :manager AND m.contract = 'thread'
)
