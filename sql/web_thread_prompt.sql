-- The web view's detail (issue 50): the whole prompt thread ?1 was started with (null when it
-- was started without one). A primary-key lookup.
SELECT t.prompt FROM threads t WHERE t.id = ?1
