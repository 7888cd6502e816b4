-- `threadbase top`: every thread's root session and forest parent, so a child's own manager's
-- threads nest under the thread whose session it is (a full read of thread_places, like the
-- thread list it goes with).
SELECT {top_place_row} FROM thread_places
