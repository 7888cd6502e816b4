-- Moves an adopted thread's place and the places below it to the adopting session's tree: the
-- new root session, the key prefix and level of its new parent; the adopted thread hangs under
-- its new forest parent. One range of thread_places_by_key.
UPDATE thread_places SET
    root_session = :new_root,
    tree_key = :new_key || substr(tree_key, length(:key) + 1),
    level = level - :level + :new_level,
    forest_parent_id = CASE WHEN thread_id = :id THEN :new_parent ELSE forest_parent_id END
WHERE root_session = :root
  AND tree_key >= :key AND tree_key < :key || '0'
  AND (length(tree_key) = length(:key) OR substr(tree_key, length(:key) + 1, 1) = '/')
