//! Admissions through the queue (group admission, [`crate::queue`]). A settlement does not
//! queue (`settle`: one read and one insert, without the lock); a settlement another session
//! queued (an earlier release queued them) is still decided by the holder that batches it.
//!
//! 1. **Queue and wait** (one flight): the request is appended (autocommit, before the lock;
//!    typed statements, so it is on the wire before the lock statement), the environment lock
//!    is taken, and the request's outcome is read in a statement that releases the lock when
//!    it finds one. Found: another holder decided it; the lock is already free; the outcome is
//!    checked (an admission against its reservation row, a settlement against its settlement
//!    row) and returned.
//! 2. **Hold** (not found: this session holds the lock): BEGIN SERIALIZABLE, the trust revision
//!    and clock, the batch (this request and the newest undecided request of every other live
//!    session of the database — the server stamped the backend's process id and the time on the
//!    request, the server's activity still lists a backend of that id, and it started before
//!    the request — in this environment, of a kind
//!    this session may write and, an admission, naming this decider; in arrival order) and
//!    this request's own reads in one flight; the other requests' reads in a second when they
//!    name other grants or reservations; every decision in memory ([`crate::queue::Batch`]);
//!    then every reservation, settlement and outcome row, COMMIT and the unlock in one flight.
//! 3. **Failures**: a serialization failure retries the batch; a write the server refuses (the
//!    backstop) rolls the whole batch back, and the request is decided again alone when others
//!    were in the batch (alone, the refusal is its answer); a lost acknowledgement ends the
//!    original backend and reads the request's outcome (committed or not, never assumed); a
//!    requester whose session ended is never decided (no live session, no batch).

use super::*;
use crate::queue::{
    Ask, Batch, GrantRow, GrantView, MAX_BATCH, OUTCOME_SCHEMA, PoolRow, PoolView, QueuedAdmission,
    QueuedOutcome, QueuedRequest, REQUEST_SCHEMA, ReservationRow, TrustView, Verdict, Write,
    digest_of, parse_outcome, parse_request, refusal, to_bytes,
};
use tokio_postgres::types::Type;

/// This store's admission, as queued.
struct Mine<'a> {
    environment: &'a str,
    request_id: String,
    /// The request record (`dpone.np-queued-request.v1` of [`Mine::admission`]).
    record: Vec<u8>,
    admission: QueuedAdmission,
    /// Decides this admission and the batch's admissions naming its identity.
    decider: &'a dyn PoolDecider,
}

/// A random request id (UUID v4 text).
fn request_id() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)
        .map_err(|_| StoreError::new(StoreCode::Unavailable, "no randomness for a request id"))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

impl PgControlStore {
    /// Queues `op` (an admission) and returns its outcome, decided by this
    /// session or by the holder of the environment lock it waited for.
    pub(super) async fn queued(&self, op: Op<'_>) -> Result<Out> {
        let Op::Admit(auth, r, facts, decider) = op else {
            return Err(StoreError::new(
                StoreCode::StoredStateInvalid,
                "only admissions queue",
            ));
        };
        let admission = QueuedAdmission {
            grant_id: r.grant.grant_id.as_str().to_owned(),
            phase: r.grant.phase.as_str().to_owned(),
            original_digest: digest_of(&r.original_bytes),
            trust_revision: auth.revision(),
            workload: r.workload.as_str().to_owned(),
            attempt: r.attempt.as_str().to_owned(),
            source_rows: r.source_rows,
            source_bytes: r.source_bytes,
            attempt_seconds: r.attempt_seconds,
            facts_hex: hex::encode(facts),
        };
        let mine = Mine {
            environment: auth.environment().as_str(),
            request_id: request_id()?,
            record: to_bytes(&QueuedRequest {
                schema: REQUEST_SCHEMA.to_owned(),
                ask: Ask::Admit(admission.clone()),
            }),
            admission,
            decider,
        };
        if mine.record.len() > crate::queue::MAX_REQUEST_BYTES {
            return Err(StoreError::new(
                StoreCode::InvalidInput,
                "the request exceeds the queue's bound",
            ));
        }
        let key = env_lock_key(mine.environment);
        let mut queued = false;
        let mut solo = false;
        let mut probed = false;
        let mut guard = self.conn.lock().await;
        for attempt in 0..=self.max_retries {
            retry_pause(attempt).await;
            if guard.is_none() {
                *guard = Some(self.open().await?);
            }
            let Some(conn) = guard.as_ref() else {
                return Err(StoreError::new(StoreCode::Unavailable, "no connection"));
            };
            let c = &conn.client;
            let db = Db {
                client: c,
                cache: &conn.cache,
            };
            // 1. Queue (once) and wait for the lock; an outcome found releases it.
            let found = match self.wait_turn(&db, key, &mine, !queued).await {
                Ok(found) => found,
                Err(e) => {
                    // Whether the lock is held is unknown: the connection is not reused.
                    *guard = None;
                    return Err(db_error("queue for the environment lock", &e));
                }
            };
            queued = true;
            if let Some(outcome) = found {
                let r = self.believe(&db, &mine, &outcome, probed).await;
                return finish(&mut guard, "read the queued outcome", r);
            }
            // 2. This session holds the lock: decide the batch.
            let held = self.hold(&db, &mine, solo).await;
            let (writes, own, size) = match held {
                Ok(held) => held,
                Err(TxError::Refuse(e)) => {
                    if !release(c, Some(key)).await {
                        *guard = None;
                    }
                    return Err(e);
                }
                Err(TxError::Db(e)) => match e.code() {
                    Some(state) if retryable(state.code()) => {
                        if !release(c, Some(key)).await {
                            *guard = None;
                        }
                        continue;
                    }
                    Some(_) => {
                        if !release(c, Some(key)).await {
                            *guard = None;
                        }
                        return Err(db_error("protected transaction", &e));
                    }
                    None => {
                        *guard = None;
                        return Err(db_error("protected transaction", &e));
                    }
                },
            };
            match commit_and_unlock(&*self.commit, c, Some(key), writes).await {
                (Flight::WriteRefused(e), _) => {
                    // The server refused a write: the whole batch rolled back. Serialization
                    // failures retry it; a backstop refusal of a batch with others in it
                    // decides this request again alone, and is this request's answer when it
                    // was alone.
                    if !release(c, Some(key)).await {
                        *guard = None;
                    }
                    let state = e.code().map(|s| s.code().to_owned());
                    if state.as_deref().is_some_and(retryable) {
                        continue;
                    }
                    if !solo && size > 1 {
                        solo = true;
                        continue;
                    }
                    return Err(db_error("protected transaction", &e));
                }
                (Flight::Ack(CommitAck::Acknowledged), unlocked) => {
                    if !unlocked {
                        *guard = None;
                    }
                    // Decided again after a lost acknowledgement found nothing committed.
                    return own.map(|out| match out {
                        Out::Reservation(r, pool) => Out::Reservation(
                            Reservation {
                                resolved_by_probe: probed,
                                ..r
                            },
                            pool,
                        ),
                        other => other,
                    });
                }
                (Flight::Ack(CommitAck::Refused(state)), _) if retryable(&state) => {
                    if !release(c, Some(key)).await {
                        *guard = None;
                    }
                }
                (Flight::Ack(CommitAck::Refused(state)), _) => {
                    if !release(c, Some(key)).await {
                        *guard = None;
                    }
                    return Err(StoreError::new(
                        StoreCode::Unavailable,
                        format!("commit failed (SQLSTATE {state})"),
                    ));
                }
                (Flight::Ack(CommitAck::Lost), _) => {
                    // 3. Committed or not is unknown: end the original backend (its transaction
                    //    is then final) and read this request's outcome on a new connection.
                    let (pid, start) = (conn.pid, conn.backend_start.clone());
                    *guard = None;
                    probed = true;
                    let conn = self.end_backend(pid, &start).await?;
                    let db = Db {
                        client: &conn.client,
                        cache: &conn.cache,
                    };
                    let outcome = self.outcome_of(&db, &mine.request_id).await;
                    match outcome {
                        Ok(Some(outcome)) => {
                            let r = self.believe(&db, &mine, &outcome, probed).await;
                            *guard = Some(conn);
                            return finish(&mut guard, "read the queued outcome", r);
                        }
                        // Not committed: the request is still queued; decide it again.
                        Ok(None) => *guard = Some(conn),
                        Err(_) => {
                            return Err(StoreError::new(
                                StoreCode::OutcomeUnknown,
                                "the commit acknowledgement was lost and the probe failed; \
                                 probe again",
                            ));
                        }
                    }
                }
            }
        }
        Err(StoreError::new(
            StoreCode::SerializationRetriesExhausted,
            format!(
                "serialization conflicts outlasted {} retries",
                self.max_retries
            ),
        ))
    }

    /// Flight 1: the request appended (when `append`), the environment lock, and the request's
    /// outcome read by a statement that releases the lock when it finds one. `Some`: decided
    /// by another holder, lock free; `None`: this session holds the lock.
    async fn wait_turn(
        &self,
        c: &Db<'_>,
        key: i64,
        mine: &Mine<'_>,
        append: bool,
    ) -> PgResult<Option<Vec<u8>>> {
        // The session and the time are the server's stamps (the table's trigger).
        let insert = format!(
            "INSERT INTO {} (request_id, environment_id, kind, decider, requester_pid, request, \
             requested_at_utc) \
             VALUES ($1::text::uuid, $2::text::uuid, $3, $4, 0, $5, '-infinity')",
            self.t.request
        );
        // The key is computed, never input: a literal.
        let take = format!("SELECT pg_advisory_lock({key})");
        let read = format!(
            "SELECT o.outcome, pg_catalog.pg_advisory_unlock({key}) FROM {} o \
             WHERE o.request_id = $1::text::uuid",
            self.t.outcome
        );
        let id = mine.request_id.as_str();
        // Typed, unprepared statements: each is sent whole when first polled, so the request is
        // on the wire before the lock and visible to the holder while this session waits (a
        // statement prepared first would run its insert only after the lock).
        let appended = async {
            if !append {
                return Ok(());
            }
            let p: [(&(dyn ToSql + Sync), Type); 5] = [
                (&id, Type::TEXT),
                (&mine.environment, Type::TEXT),
                (&"admit", Type::TEXT),
                (&mine.decider.identity(), Type::TEXT),
                (&mine.record, Type::BYTEA),
            ];
            match c.client.query_typed(&insert, &p).await {
                Ok(_) => Ok(()),
                // Appended by an earlier try whose answer was lost.
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                    Ok(())
                }
                Err(e) => Err(e),
            }
        };
        let read_params: [(&(dyn ToSql + Sync), Type); 1] = [(&id, Type::TEXT)];
        let (_, _, found) = tokio::try_join!(
            biased;
            appended,
            c.client.batch_execute(&take),
            c.client.query_typed(&read, &read_params)
        )?;
        Ok(found.first().map(|row| row.get(0)))
    }

    /// The outcome of request `id`, if one was committed.
    async fn outcome_of(&self, c: &Db<'_>, id: &str) -> Tx<Option<Vec<u8>>> {
        let sql = format!(
            "SELECT outcome FROM {} WHERE request_id = $1::text::uuid",
            self.t.outcome
        );
        Ok(c.query_opt(&sql, &[&id]).await?.map(|r| r.get(0)))
    }

    /// An outcome another holder (or this session, before a lost acknowledgement) wrote,
    /// checked before it is believed: an admitted one against its reservation row, and only an
    /// admission's decisions.
    async fn believe(&self, c: &Db<'_>, mine: &Mine<'_>, bytes: &[u8], probed: bool) -> Tx<Out> {
        let outcome = parse_outcome(bytes)?;
        let forged = || {
            TxError::Refuse(StoreError::new(
                StoreCode::StoredStateInvalid,
                "the queued outcome does not match the store's rows",
            ))
        };
        match outcome.verdict {
            Verdict::Admitted {
                reservation_id,
                pool_before,
            } => {
                let found = Self::reservation_by_id(c, &self.t, &reservation_id)
                    .await?
                    .filter(|r| crate::queue::is_reservation_of(r, &mine.admission))
                    .ok_or_else(forged)?;
                Ok(Out::Reservation(
                    Reservation {
                        resolved_by_probe: probed,
                        ..found
                    },
                    pool_before,
                ))
            }
            Verdict::Denied { pool_before } => Ok(Out::Denied(pool_before)),
            Verdict::Refused { code, message } => Err(TxError::Refuse(refusal(&code, &message))),
            Verdict::Settled { .. } => Err(forged()),
        }
    }

    /// Ends backend `pid` (started at `start`) from a new connection and waits until it has
    /// ended, so its transaction is final; returns the new connection.
    async fn end_backend(&self, pid: i32, start: &str) -> Result<Conn> {
        let unknown = |why: &str| {
            StoreError::new(
                StoreCode::OutcomeUnknown,
                format!("the commit acknowledgement was lost and {why}; probe again"),
            )
        };
        let conn = self
            .open()
            .await
            .map_err(|_| unknown("the store cannot be reached"))?;
        let c = &conn.client;
        let alive = "SELECT count(*) FROM pg_catalog.pg_stat_activity \
                     WHERE pid = $1 AND backend_start::text = $2";
        let _ = c
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity \
                 WHERE pid = $1 AND backend_start::text = $2",
                &[&pid, &start],
            )
            .await;
        for _ in 0..400 {
            match c.query_one(alive, &[&pid, &start]).await {
                Ok(r) if r.get::<_, i64>(0) == 0 => return Ok(conn),
                Ok(_) => tokio::time::sleep(Duration::from_millis(25)).await,
                Err(_) => return Err(unknown("the probe failed")),
            }
        }
        Err(unknown("the original backend has not ended"))
    }

    /// Holds the lock: decides the batch (see the module docs) and returns its writes (every
    /// row and every outcome, in order), this request's own result, which stands once they
    /// commit, and the batch's size.
    async fn hold(
        &self,
        c: &Db<'_>,
        mine: &Mine<'_>,
        solo: bool,
    ) -> Tx<(Vec<DeferredWrite>, Result<Out>, u32)> {
        let env = mine.environment;
        let may = |table: &str| {
            // The table's quoted name as a string literal (the schema is a validated
            // identifier and the names are the store's own).
            format!("pg_catalog.has_table_privilege('{table}', 'INSERT')")
        };
        let batch_sql = format!(
            "SELECT b.request_id, b.request FROM ( \
               SELECT r.request_seq, r.request_id::text AS request_id, r.request FROM {req} r \
               WHERE r.request_id = $1::text::uuid \
               UNION ALL ( \
               SELECT r.request_seq, r.request_id::text, r.request FROM ( \
                 SELECT a.pid, a.backend_start FROM pg_catalog.pg_stat_get_activity(NULL) a \
                 WHERE $4 AND a.pid <> pg_catalog.pg_backend_pid() \
                 AND a.datid = (SELECT d.oid FROM pg_catalog.pg_database d \
                                WHERE d.datname = pg_catalog.current_database())) w \
               CROSS JOIN LATERAL ( \
                 SELECT q.* FROM {req} q WHERE q.requester_pid = w.pid \
                 ORDER BY q.request_seq DESC LIMIT 1) r \
               WHERE r.requested_at_utc >= w.backend_start \
               AND r.environment_id = $2::text::uuid AND r.request_id <> $1::text::uuid \
               AND ((r.kind = 'admit' AND r.decider = $3 AND {may_reserve}) \
                    OR (r.kind = 'settle' AND {may_settle})) \
               AND NOT EXISTS (SELECT 1 FROM {out} o WHERE o.request_id = r.request_id) \
               ORDER BY r.request_seq LIMIT {others})) b \
             ORDER BY b.request_seq",
            req = self.t.request,
            out = self.t.outcome,
            may_reserve = may(&self.t.reservation),
            may_settle = may(&self.t.settlement),
            others = MAX_BATCH - 1,
        );
        let clock_sql = format!(
            "SELECT clock_timestamp() < coalesce(max(recorded_at_utc), '-infinity') \
             FROM {} WHERE environment_id = $1::text::uuid",
            self.t.trust
        );
        let id = mine.request_id.as_str();
        let decider = mine.decider.identity();
        let batch_params: [&(dyn ToSql + Sync); 4] = [&id, &env, &decider, &!solo];
        let begin = c.client.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE");
        let own_grant = (
            mine.admission.grant_id.clone(),
            mine.admission.phase.clone(),
        );
        let (_, current, clock, rows, (own_view, own_pool), statements) = tokio::try_join!(
            biased;
            async { begin.await.map_err(TxError::from) },
            Self::trust_at(c, &self.t, env, None),
            async { Ok(c.query_one(&clock_sql, &[&env]).await?.get::<_, bool>(0)) },
            async { Ok(c.query(&batch_sql, &batch_params).await?) },
            self.grant_reads(c, &own_grant.0, &own_grant.1),
            self.write_statements(c)
        )?;
        let mut batch = Batch {
            environment: env.to_owned(),
            trust: TrustView {
                current,
                clock_back: clock,
            },
            grants: HashMap::new(),
            pools: HashMap::new(),
            reservations: HashMap::new(),
        };
        batch.grants.insert(own_grant, own_view);
        if let Some((pk, pv)) = own_pool {
            batch.pools.insert(pk, pv);
        }
        // The batch's requests, parsed; the other requests' reads in one more flight.
        let requests: Vec<(String, std::result::Result<QueuedRequest, StoreError>)> = rows
            .iter()
            .map(|r| {
                let rid: String = r.get(0);
                let bytes: Vec<u8> = r.get(1);
                (rid, parse_request(&bytes))
            })
            .collect();
        if !requests.iter().any(|(rid, _)| rid == id) {
            return Err(TxError::Refuse(StoreError::new(
                StoreCode::StoredStateInvalid,
                "the queued request is missing from its own batch",
            )));
        }
        let mut grants: Vec<(String, String)> = Vec::new();
        let mut settles: Vec<String> = Vec::new();
        for (_, r) in &requests {
            match r {
                Ok(QueuedRequest {
                    ask: Ask::Admit(a), ..
                }) => {
                    let k = (a.grant_id.clone(), a.phase.clone());
                    if !batch.grants.contains_key(&k) && !grants.contains(&k) {
                        grants.push(k);
                    }
                }
                Ok(QueuedRequest {
                    ask: Ask::Settle(s),
                    ..
                }) => {
                    if !batch.reservations.contains_key(&s.reservation_id)
                        && !settles.contains(&s.reservation_id)
                    {
                        settles.push(s.reservation_id.clone());
                    }
                }
                Err(_) => {}
            }
        }
        if !grants.is_empty() || !settles.is_empty() {
            let reads = grants.iter().map(|(g, p)| self.grant_reads(c, g, p));
            let (views, res) = tokio::join!(in_order(reads), self.settle_reads(c, &settles));
            for (k, view) in grants.into_iter().zip(views) {
                let (view, pool) = view?;
                batch.grants.insert(k, view);
                if let Some((pk, pv)) = pool {
                    batch.pools.entry(pk).or_insert(pv);
                }
            }
            batch.reservations.extend(res?);
        }
        // Every decision, in arrival order, on the batch as the ones before left it.
        let size = u32::try_from(requests.len()).unwrap_or(u32::MAX);
        let mut writes = Vec::new();
        let mut own: Option<Result<Out>> = None;
        let (insert_reservation, insert_settlement, insert_outcome) = statements;
        for (rid, request) in requests {
            let is_mine = rid == id;
            let decided = match request {
                Err(e) => Err(e),
                Ok(q) => match &q.ask {
                    Ask::Admit(a) => batch.admit(a, mine.decider),
                    Ask::Settle(s) => batch.settle(s),
                },
            };
            let verdict = match &decided {
                Ok((v, _)) => v.clone(),
                Err(e) => Verdict::Refused {
                    code: e.code.as_str().to_owned(),
                    message: e.message.clone(),
                },
            };
            if let Ok((_, Some(w))) = &decided {
                writes.push(self.row_write(env, w, &insert_reservation, &insert_settlement));
            }
            writes.push(DeferredWrite {
                statement: insert_outcome.clone(),
                params: vec![
                    Box::new(rid.clone()),
                    Box::new(to_bytes(&QueuedOutcome {
                        schema: OUTCOME_SCHEMA.to_owned(),
                        batch: size,
                        verdict,
                    })),
                ],
            });
            if is_mine {
                own = Some(own_out(decided));
            }
        }
        let own = own.unwrap_or_else(|| {
            Err(StoreError::new(
                StoreCode::StoredStateInvalid,
                "the queued request was not decided",
            ))
        });
        Ok((writes, own, size))
    }

    /// The insert statements of a batch's rows, prepared on this connection (cached after the
    /// first batch).
    async fn write_statements(&self, c: &Db<'_>) -> Tx<(Statement, Statement, Statement)> {
        let reservation = format!(
            "INSERT INTO {} (reservation_id, environment_id, campaign_id, phase, route, \
             grant_id, grant_digest, trust_revision, workload_id, attempt_id, \
             reserved_source_rows, reserved_source_bytes, reserved_seconds, reserved_at_utc) \
             VALUES ($1, $2::text::uuid, $3::text::uuid, $4, $5, $6::text::uuid, $7, $8, $9, \
             $10, $11, $12, $13, clock_timestamp())",
            self.t.reservation
        );
        let settlement = format!(
            "INSERT INTO {} (reservation_id, measured_source_rows, measured_source_bytes, \
             measured_http_bytes, outcome, settled_at_utc) \
             VALUES ($1, $2, $3, $4, $5, clock_timestamp())",
            self.t.settlement
        );
        let outcome = format!(
            "INSERT INTO {} (request_id, outcome, decided_at_utc) \
             VALUES ($1::text::uuid, $2, clock_timestamp())",
            self.t.outcome
        );
        let (r, s, o) = tokio::try_join!(
            c.statement(&reservation),
            c.statement(&settlement),
            c.statement(&outcome)
        )?;
        Ok((r, s, o))
    }

    /// A decision's row as a deferred write.
    fn row_write(
        &self,
        environment: &str,
        w: &Write,
        reservation: &Statement,
        settlement: &Statement,
    ) -> DeferredWrite {
        match w {
            Write::Reservation {
                id,
                campaign,
                phase,
                route,
                grant_id,
                grant_digest,
                trust_revision,
                workload,
                attempt,
                rows,
                bytes,
                seconds,
            } => DeferredWrite {
                statement: reservation.clone(),
                params: vec![
                    Box::new(id.clone()),
                    Box::new(environment.to_owned()),
                    Box::new(campaign.clone()),
                    Box::new(phase.as_str().to_owned()),
                    Box::new(route.clone()),
                    Box::new(grant_id.clone()),
                    Box::new(grant_digest.clone()),
                    Box::new(*trust_revision),
                    Box::new(workload.clone()),
                    Box::new(attempt.clone()),
                    Box::new(*rows),
                    Box::new(*bytes),
                    Box::new(*seconds),
                ],
            },
            Write::Settlement(s) => DeferredWrite {
                statement: settlement.clone(),
                params: vec![
                    Box::new(s.reservation_id.clone()),
                    Box::new(s.measured_source_rows),
                    Box::new(s.measured_source_bytes),
                    Box::new(s.measured_http_bytes),
                    Box::new(s.outcome.clone()),
                ],
            },
        }
    }

    /// What a holder reads for one grant, in one flight: its registration, ownership, workload
    /// ceilings, and its pool's membership and reservations (with their settlements), the
    /// pool keyed by the registration's campaign and phase.
    async fn grant_reads(
        &self,
        c: &Db<'_>,
        grant_id: &str,
        phase: &str,
    ) -> Tx<(GrantView, Option<((String, String), PoolView)>)> {
        let t = &self.t;
        let owned_sql = format!(
            "SELECT (SELECT count(*) FROM {c} q WHERE q.run_id = g.qualification_run_id \
               AND q.grant_id = g.grant_id AND q.grant_digest = g.grant_digest) \
             + (SELECT count(*) FROM {s} x WHERE x.activation_id = g.activation_id \
               AND x.grant_id = g.grant_id AND x.grant_digest = g.grant_digest) \
             FROM {r} g WHERE g.grant_id = $1::text::uuid AND g.phase = $2",
            c = t.consumption,
            s = t.selection,
            r = t.registration
        );
        let workloads_sql = format!(
            "SELECT workload_id, {LIMIT_COLUMNS} FROM {} WHERE grant_id = $1::text::uuid \
             AND phase = $2",
            t.workload
        );
        let members_sql = format!(
            "SELECT m.workload_id FROM {r} g JOIN {m} m ON m.environment_id = g.environment_id \
             AND m.campaign_id = g.campaign_id AND m.phase = g.phase \
             WHERE g.grant_id = $1::text::uuid AND g.phase = $2",
            r = t.registration,
            m = t.membership
        );
        let pool_sql = format!(
            "SELECT x.reservation_id, x.workload_id, x.attempt_id, x.route, \
             x.reserved_source_rows, x.reserved_source_bytes, s.measured_source_rows, \
             s.measured_source_bytes, s.measured_http_bytes, s.reservation_id IS NOT NULL \
             FROM {r} g JOIN {x} x ON x.environment_id = g.environment_id \
             AND x.campaign_id = g.campaign_id AND x.phase = g.phase \
             LEFT JOIN {s} s ON s.reservation_id = x.reservation_id \
             WHERE g.grant_id = $1::text::uuid AND g.phase = $2",
            r = t.registration,
            x = t.reservation,
            s = t.settlement
        );
        let key = GrantKey {
            grant_id: stored(Uuid::parse("grant_id", grant_id))?,
            phase: phase_of(phase)?,
        };
        let p: [&(dyn ToSql + Sync); 2] = [&grant_id, &phase];
        let (registration, owned, workloads, members, pool) = tokio::join!(
            self.load_grant(c, &key),
            c.query_opt(&owned_sql, &p),
            c.query(&workloads_sql, &p),
            c.query(&members_sql, &p),
            c.query(&pool_sql, &p)
        );
        let registration = registration?;
        let owned = owned?.map_or(0, |r| r.get::<_, i64>(0));
        let workloads = workloads?
            .iter()
            .map(|r| (r.get::<_, String>(0), limits_at(r, 1)))
            .collect();
        let (members, pool) = (members?, pool?);
        let pool = registration.as_ref().map(|g| {
            let view = PoolView {
                members: members.iter().map(|r| r.get::<_, String>(0)).collect(),
                rows: pool
                    .iter()
                    .map(|r| PoolRow {
                        reservation_id: r.get(0),
                        workload: r.get(1),
                        attempt: r.get(2),
                        route: r.get(3),
                        rows: r.get(4),
                        bytes: r.get(5),
                        settled: r.get::<_, bool>(9).then(|| (r.get(6), r.get(7), r.get(8))),
                    })
                    .collect(),
            };
            ((g.campaign.clone(), g.phase.as_str().to_owned()), view)
        });
        let row = registration.map(|g| GrantRow {
            bytes_digest: digest_of(&g.bytes),
            environment: g.environment,
            campaign: g.campaign,
            phase: g.phase,
            digest: g.digest,
            revocation_epoch: g.revocation_epoch,
            limits: g.limits,
            route: g.route,
            expired: g.expired,
            not_yet_valid: g.not_yet_valid,
        });
        Ok((
            GrantView {
                row,
                owned,
                workloads,
            },
            pool,
        ))
    }

    /// The reservations `ids` name, with their settlements.
    async fn settle_reads(&self, c: &Db<'_>, ids: &[String]) -> Tx<Vec<(String, ReservationRow)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT r.reservation_id, r.environment_id::text, r.campaign_id::text, r.phase, \
             r.reserved_source_rows, r.reserved_source_bytes, s.measured_source_rows, \
             s.measured_source_bytes, s.measured_http_bytes, s.outcome \
             FROM {} r LEFT JOIN {} s ON s.reservation_id = r.reservation_id \
             WHERE r.reservation_id = ANY($1)",
            self.t.reservation, self.t.settlement
        );
        let rows = c.query(&sql, &[&ids]).await?;
        Ok(rows
            .iter()
            .map(|r| {
                let settled = r
                    .get::<_, Option<String>>(9)
                    .map(|o| (r.get(6), r.get(7), r.get(8), o));
                (
                    r.get(0),
                    ReservationRow {
                        environment: r.get(1),
                        campaign: r.get(2),
                        phase: r.get(3),
                        rows: r.get(4),
                        bytes: r.get(5),
                        settled,
                    },
                )
            })
            .collect())
    }
}

/// This request's own result from its decision (it stands once the batch commits).
fn own_out(decided: std::result::Result<(Verdict, Option<Write>), StoreError>) -> Result<Out> {
    match decided? {
        (
            Verdict::Admitted { pool_before, .. },
            Some(Write::Reservation {
                id,
                grant_id,
                grant_digest,
                trust_revision,
                workload,
                attempt,
                rows,
                bytes,
                seconds,
                phase,
                ..
            }),
        ) => {
            let invalid = |_| StoreError::new(StoreCode::StoredStateInvalid, "a stored value");
            Ok(Out::Reservation(
                Reservation {
                    reservation_id: Sha256Digest::parse("reservation_id", &id).map_err(invalid)?,
                    grant: GrantKey {
                        grant_id: Uuid::parse("grant_id", &grant_id).map_err(invalid)?,
                        phase,
                    },
                    grant_digest: Sha256Digest::parse("grant_digest", &grant_digest)
                        .map_err(invalid)?,
                    trust_revision,
                    workload: WorkloadId::new(&workload).map_err(invalid)?,
                    attempt: AttemptId::new(&attempt).map_err(invalid)?,
                    source_rows: rows,
                    source_bytes: bytes,
                    attempt_seconds: seconds,
                    resolved_by_probe: false,
                },
                pool_before,
            ))
        }
        (Verdict::Denied { pool_before }, None) => Ok(Out::Denied(pool_before)),
        _ => Err(StoreError::new(
            StoreCode::StoredStateInvalid,
            "the queued decision is not of the kind asked",
        )),
    }
}
