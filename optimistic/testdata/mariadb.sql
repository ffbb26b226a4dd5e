-- name: VersionsStampQuery
INSERT INTO `sqllock_versions` (lock_key, version) VALUES (?, NEXTVAL(sqllock_fence_seq))
ON DUPLICATE KEY UPDATE version = NEXTVAL(sqllock_fence_seq) RETURNING version

-- name: VersionsReleaseQuery
UPDATE `sqllock_versions` SET version = -version WHERE lock_key = ? AND version = ?

-- name: VersionsReadQuery
SELECT version FROM `sqllock_versions` WHERE lock_key = ?

-- name: CounterTake
UPDATE `sqllock_counters` SET qty = qty - 1 WHERE item = ? AND stripe = ? AND qty > 0

-- name: CounterTotal
SELECT COALESCE(SUM(qty), 0) FROM `sqllock_counters` WHERE item = ?

-- name: CounterLeft
SELECT COALESCE(SUM(qty), 0), COUNT(*) FROM `sqllock_counters` WHERE item = ?

-- name: CounterClear
DELETE FROM `sqllock_counters` WHERE item = ?

-- name: CounterInsert
INSERT INTO `sqllock_counters` (item, stripe, qty) VALUES (?, ?, ?)

-- name: CounterSchema
CREATE TABLE `sqllock_counters` (item varbinary(255) NOT NULL, stripe int NOT NULL, qty bigint NOT NULL, PRIMARY KEY (item, stripe)) ENGINE=InnoDB

-- name: TableUpdate
UPDATE `sqllock_demo_stock` SET `units` = ?, `note` = ?, `version` = `version` + 1 WHERE `item` = ? AND `version` = ?
