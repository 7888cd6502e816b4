-- A detached child's result is held back for the final recap (the row stays pending; by key).
UPDATE mailbox SET recap_held = 1 WHERE id = :id
