-- Archives or unarchives a closed thread.
UPDATE threads SET archived = :archived, updated_at = :at WHERE id = :id AND status = 'closed'
