-- sql/check_duplicate_paths.sql on PostgreSQL: group_concat is string_agg.
SELECT manager_id, path, count(*), string_agg(id, ', ')
FROM threads GROUP BY manager_id, path HAVING count(*) > 1
