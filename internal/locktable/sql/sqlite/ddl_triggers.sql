-- DDL of the table's two triggers, which bump the fence row to every new
-- token the table's rows take, in the statement that takes it, so a take
-- needs no transaction of its own. Named after the table; migration 00018
-- gives sqllock_locks and sqllock_jobs the same. A table in another
-- schema (an attached database) gets none: its takes bump the fence row
-- themselves.
CREATE TRIGGER `sqllock_locks_token_in` AFTER INSERT ON `sqllock_locks` BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
CREATE TRIGGER `sqllock_locks_token_up` AFTER UPDATE OF token ON `sqllock_locks` WHEN NEW.token > OLD.token BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;
