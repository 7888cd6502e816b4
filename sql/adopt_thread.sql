-- Moves a closed thread's row under the adopting manager (primary key); nothing when it is
-- live again or was moved meanwhile.
UPDATE threads SET manager_id = :to, path = :path, parent_path = :parent_path,
                   parent_id = :parent_id, depth = :depth, updated_at = :at
WHERE id = :id AND manager_id = :from AND status = 'closed'
