-- Fence: bumps the fence row to ?1 (the token a take drew), in the
-- take's transaction, where the table has no triggers to do it.
UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1
