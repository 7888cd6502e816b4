-- One question by its id.
SELECT {question_row}
FROM ui_requests r WHERE id = ?1
