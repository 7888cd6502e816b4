-- Every thread that needs the user (the view thread_attention, V16), for the views that show
-- a whole database (`tree`, `list`, `top`, the web page's band): a row per such thread.
SELECT {attention_row}
FROM thread_attention AS a
