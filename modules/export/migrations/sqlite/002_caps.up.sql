-- One row per in-flight scope ("tenant:<t>" or "user:<t>:<u>"): a task
-- request locks its scopes' rows before counting their running tasks, so
-- two requests racing for the last slot are counted one after the other
-- and the in-flight caps hold. The rows carry no count: finishing or
-- cancelling a task releases its slot by its state alone.
CREATE TABLE export_caps (
    scope text PRIMARY KEY
);
