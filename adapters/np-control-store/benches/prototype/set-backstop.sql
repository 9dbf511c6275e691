-- A PROTOTYPE, for the admission bench's floor only (DPONE_BENCH_FLOOR_SET_BACKSTOP=1), never the
-- product's DDL: the reservation backstop's checks run once per INSERT statement over its
-- transition table, as post-conditions on the pool after the statement (at least as strict as
-- one row at a time). Known gaps against the reviewed backstop (control-store.sql): the refusal
-- code of a row failing several checks is the lowest code, not the first in the reviewed order;
-- the catalog contract does not know the statement trigger; no attack tests beyond NP001,
-- NP017 and NP007 tried by hand.
CREATE OR REPLACE FUNCTION "dpone_np_control"."np_check_reservation"() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
IF current_setting('transaction_isolation') = 'repeatable read' THEN
RAISE EXCEPTION 'dpone backstop: reservations are written under READ COMMITTED or SERIALIZABLE' USING ERRCODE = 'NP016';
END IF;
NEW.reserved_at_utc := clock_timestamp();
RETURN NEW;
END
$$;
CREATE OR REPLACE FUNCTION "dpone_np_control"."np_check_reservation_set"() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
bad text;
BEGIN
PERFORM pg_advisory_xact_lock(('x' || substr(encode(sha256(convert_to('dpone.np-control-store.lock:' || e.environment_id::text, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint)
FROM (SELECT DISTINCT environment_id FROM inserted ORDER BY 1) e;
WITH pools AS (SELECT DISTINCT environment_id, campaign_id, phase FROM inserted),
attempts AS (SELECT r.environment_id, r.campaign_id, r.phase, count(*) AS n FROM "dpone_np_control"."np_reservation" r
  JOIN pools USING (environment_id, campaign_id, phase) GROUP BY 1, 2, 3),
by_route AS (SELECT r.environment_id, r.campaign_id, r.phase, r.route, sum(r.reserved_source_rows) AS source_rows,
  sum(r.reserved_source_bytes) AS source_bytes FROM "dpone_np_control"."np_reservation" r
  JOIN pools USING (environment_id, campaign_id, phase) GROUP BY 1, 2, 3, 4),
members AS (SELECT m.environment_id, m.campaign_id, m.phase, count(*) AS n FROM "dpone_np_control"."np_membership" m
  JOIN pools USING (environment_id, campaign_id, phase) GROUP BY 1, 2, 3),
unresolved AS (SELECT r.environment_id, r.campaign_id, r.phase, r.workload_id, count(*) AS n
  FROM "dpone_np_control"."np_reservation" r
  JOIN (SELECT DISTINCT environment_id, campaign_id, phase, workload_id FROM inserted) k
  USING (environment_id, campaign_id, phase, workload_id)
  WHERE NOT EXISTS (SELECT 1 FROM "dpone_np_control"."np_settlement" s WHERE s.reservation_id = r.reservation_id)
  GROUP BY 1, 2, 3, 4),
checked AS (
SELECT CASE
WHEN g.grant_id IS NULL OR g.environment_id <> n.environment_id OR g.campaign_id <> n.campaign_id
  OR g.route IS DISTINCT FROM n.route OR g.grant_digest <> n.grant_digest THEN 'NP001'
WHEN n.reservation_id <> 'sha256:' || encode(sha256(convert_to('dpone.np-control-store.reservation.v1', 'UTF8')
  || int4send(octet_length(n.environment_id::text)) || convert_to(n.environment_id::text, 'UTF8')
  || int4send(octet_length(n.campaign_id::text)) || convert_to(n.campaign_id::text, 'UTF8')
  || int4send(octet_length(n.phase)) || convert_to(n.phase, 'UTF8')
  || int4send(octet_length(n.workload_id)) || convert_to(n.workload_id, 'UTF8')
  || int4send(octet_length(n.attempt_id)) || convert_to(n.attempt_id, 'UTF8')), 'hex') THEN 'NP017'
WHEN t.revision IS DISTINCT FROM n.trust_revision THEN 'NP002'
WHEN g.revocation_epoch < t.revocation_epoch THEN 'NP003'
WHEN clock_timestamp() >= g.not_after_utc THEN 'NP004'
WHEN clock_timestamp() < g.not_before_utc THEN 'NP005'
WHEN n.phase = 'qualification' AND NOT EXISTS (SELECT 1 FROM "dpone_np_control"."np_qualification_consumption" q
  WHERE q.run_id = g.qualification_run_id AND q.grant_id = n.grant_id AND q.grant_digest = g.grant_digest) THEN 'NP006'
WHEN n.phase = 'execution' AND NOT EXISTS (SELECT 1 FROM "dpone_np_control"."np_activation_selection" a
  WHERE a.activation_id = g.activation_id AND a.grant_id = n.grant_id AND a.grant_digest = g.grant_digest) THEN 'NP007'
WHEN w.grant_id IS NULL THEN 'NP008'
WHEN u.n > 1 THEN 'NP009'
WHEN n.reserved_seconds > least(t.max_attempt_seconds, g.max_attempt_seconds, w.max_attempt_seconds) THEN 'NP010'
WHEN NOT EXISTS (SELECT 1 FROM "dpone_np_control"."np_membership" m WHERE m.environment_id = n.environment_id
  AND m.campaign_id = n.campaign_id AND m.phase = n.phase AND m.workload_id = n.workload_id)
  OR coalesce(mb.n, 0) > least(t.max_workloads, g.max_workloads, w.max_workloads,
     (SELECT coalesce(min(x.max_workloads), 0) FROM "dpone_np_control"."np_grant_workload" x
      WHERE x.grant_id = n.grant_id AND x.phase = n.phase)) THEN 'NP011'
WHEN a.n > least(t.max_attempts, g.max_attempts, w.max_attempts) THEN 'NP012'
WHEN br.source_rows > least(t.max_source_rows, g.max_source_rows, w.max_source_rows) THEN 'NP013'
WHEN br.source_bytes > least(t.max_source_bytes, g.max_source_bytes, w.max_source_bytes) THEN 'NP014'
END AS code
FROM inserted n
LEFT JOIN "dpone_np_control"."np_registration" g ON g.grant_id = n.grant_id AND g.phase = n.phase
LEFT JOIN LATERAL (SELECT * FROM "dpone_np_control"."np_trust_revision" tr WHERE tr.environment_id = n.environment_id
  ORDER BY tr.revision DESC LIMIT 1) t ON true
LEFT JOIN "dpone_np_control"."np_grant_workload" w ON w.grant_id = n.grant_id AND w.phase = n.phase AND w.workload_id = n.workload_id
LEFT JOIN unresolved u ON u.environment_id = n.environment_id AND u.campaign_id = n.campaign_id AND u.phase = n.phase AND u.workload_id = n.workload_id
LEFT JOIN members mb ON mb.environment_id = n.environment_id AND mb.campaign_id = n.campaign_id AND mb.phase = n.phase
LEFT JOIN attempts a ON a.environment_id = n.environment_id AND a.campaign_id = n.campaign_id AND a.phase = n.phase
LEFT JOIN by_route br ON br.environment_id = n.environment_id AND br.campaign_id = n.campaign_id AND br.phase = n.phase
  AND br.route IS NOT DISTINCT FROM n.route)
SELECT min(code) INTO bad FROM checked;
IF bad IS NOT NULL THEN
RAISE EXCEPTION 'dpone backstop: refused (%)', bad USING ERRCODE = bad;
END IF;
RETURN NULL;
END
$$;
CREATE TRIGGER np_backstop_set AFTER INSERT ON "dpone_np_control"."np_reservation"
REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION "dpone_np_control"."np_check_reservation_set"();
