-- `threadbase check`: how many rows each checked table holds (full counts; a check reads everything).
SELECT {check_counts_row}
