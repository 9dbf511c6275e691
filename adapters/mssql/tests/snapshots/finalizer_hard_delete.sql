-- target_ddl
CREATE TABLE [DWH].[dbo].[orders] (
    [tenant] nvarchar(64) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [id] bigint NOT NULL,
    [amount] decimal(18,2) NULL,
    [note] nvarchar(200) COLLATE SQL_Latin1_General_CP1_CI_AS NULL,
    [__dpone__updated_at] datetime2(7) NOT NULL,
    CONSTRAINT [PK_orders] PRIMARY KEY CLUSTERED ([tenant], [id])
);

-- stage_rows_ddl
CREATE TABLE [DWH_Stage].[dpone].[rows_0123456789abcdef] (
    [tenant] nvarchar(64) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [id] bigint NOT NULL,
    [amount] decimal(18,2) NULL,
    [note] nvarchar(200) COLLATE SQL_Latin1_General_CP1_CI_AS NULL,
    PRIMARY KEY CLUSTERED ([tenant], [id])
);

-- stage_keys_ddl
CREATE TABLE [DWH_Stage].[dpone].[keys_0123456789abcdef] (
    [tenant] nvarchar(64) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [id] bigint NOT NULL,
    PRIMARY KEY CLUSTERED ([tenant], [id])
);

-- staged_counts
SELECT (SELECT COUNT_BIG(*) FROM [DWH_Stage].[dpone].[rows_0123456789abcdef]) AS row_count, (SELECT COUNT_BIG(*) FROM [DWH_Stage].[dpone].[keys_0123456789abcdef]) AS key_count;

-- read_own_state
SELECT state_key, target_identity, scope_hash, safe_xmin, revision, visible_horizon, last_receipt_id, CONVERT(int, CASE WHEN superseded_at_utc IS NULL THEN 0 ELSE 1 END) AS superseded FROM [DWH_State].[dpone].[dpone_source_state] WITH (UPDLOCK, HOLDLOCK) WHERE state_key = @P1;

-- read_other_owner
SELECT state_key, safe_xmin, revision FROM [DWH_State].[dpone].[dpone_source_state] WITH (UPDLOCK, HOLDLOCK) WHERE target_identity = @P2 AND state_key <> @P1 AND superseded_at_utc IS NULL;

-- read_authority
SELECT a.authority_id, a.recorded_digest, a.document, CONVERT(int, CASE WHEN c.receipt_id IS NULL THEN 0 ELSE 1 END) AS consumed FROM [DWH_State].[dpone].[dpone_repair_authority] AS a WITH (UPDLOCK, HOLDLOCK) LEFT JOIN [DWH_State].[dpone].[dpone_repair_authority_consumption] AS c WITH (UPDLOCK, HOLDLOCK) ON c.authority_id = a.authority_id WHERE a.authority_id = @P1;

-- missing_table_ddl
DROP TABLE IF EXISTS #dpone_missing; CREATE TABLE #dpone_missing ([tenant] nvarchar(64) COLLATE Latin1_General_100_BIN2 NOT NULL, [id] bigint NOT NULL, PRIMARY KEY CLUSTERED ([tenant], [id]));

-- populations
DELETE FROM #dpone_missing; INSERT INTO #dpone_missing ([tenant], [id]) SELECT t.[tenant], t.[id] FROM [DWH].[dbo].[orders] AS t WHERE 1 = 1 AND NOT EXISTS (SELECT 1 FROM [DWH_Stage].[dpone].[keys_0123456789abcdef] AS k WHERE k.[tenant] = t.[tenant] AND k.[id] = t.[id]); SELECT (SELECT COUNT_BIG(*) FROM [DWH].[dbo].[orders] AS t WHERE 1 = 1) AS active, (SELECT COUNT_BIG(*) FROM [DWH].[dbo].[orders]) AS total, (SELECT COUNT_BIG(*) FROM #dpone_missing) AS missing;

-- supersede
DECLARE @dpone_out TABLE (n bit NOT NULL); UPDATE s SET s.superseded_at_utc = @P5, s.superseded_by = @P4 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) FROM [DWH_State].[dpone].[dpone_source_state] AS s WHERE s.state_key = @P1 AND s.safe_xmin = @P2 AND s.revision = @P3 AND s.superseded_at_utc IS NULL; SELECT COUNT_BIG(*) AS affected FROM @dpone_out;

-- update_changed
DECLARE @dpone_out TABLE (n bit NOT NULL); UPDATE t SET t.[amount] = s.[amount], t.[note] = s.[note], t.[__dpone__updated_at] = @P1 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) FROM [DWH].[dbo].[orders] AS t INNER JOIN [DWH_Stage].[dpone].[rows_0123456789abcdef] AS s ON s.[tenant] = t.[tenant] AND s.[id] = t.[id] WHERE 1 = 1 AND EXISTS (SELECT s.[amount], CONVERT(varbinary(8000), s.[note]), DATALENGTH(s.[note]) EXCEPT SELECT t.[amount], CONVERT(varbinary(8000), t.[note]), DATALENGTH(t.[note])); SELECT COUNT_BIG(*) AS affected FROM @dpone_out;

-- reactivate
SELECT CAST(0 AS bigint) AS affected;

-- insert
DECLARE @dpone_out TABLE (n bit NOT NULL); INSERT INTO [DWH].[dbo].[orders] ([tenant], [id], [amount], [note], [__dpone__updated_at]) OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) SELECT s.[tenant], s.[id], s.[amount], s.[note], @P1 FROM [DWH_Stage].[dpone].[rows_0123456789abcdef] AS s WHERE NOT EXISTS (SELECT 1 FROM [DWH].[dbo].[orders] AS t WHERE t.[tenant] = s.[tenant] AND t.[id] = s.[id]); SELECT COUNT_BIG(*) AS affected FROM @dpone_out;

-- missing_action
DECLARE @dpone_out TABLE (n bit NOT NULL); DELETE t OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) FROM [DWH].[dbo].[orders] AS t INNER JOIN #dpone_missing AS m ON m.[tenant] = t.[tenant] AND m.[id] = t.[id] WHERE 1 = 1; SELECT COUNT_BIG(*) AS affected FROM @dpone_out;

-- parity
SELECT (SELECT COUNT_BIG(*) FROM [DWH].[dbo].[orders] AS t WHERE 1 = 1) AS active, (SELECT COUNT_BIG(*) FROM [DWH].[dbo].[orders]) AS total, (SELECT COUNT_BIG(*) FROM [DWH_Stage].[dpone].[rows_0123456789abcdef] AS s WHERE NOT EXISTS (SELECT 1 FROM [DWH_Stage].[dpone].[keys_0123456789abcdef] AS k WHERE k.[tenant] = s.[tenant] AND k.[id] = s.[id])) AS delta_outside_snapshot;

-- cas_update
DECLARE @dpone_out TABLE (n bit NOT NULL); UPDATE s SET s.safe_xmin = @P4, s.revision = @P5, s.visible_horizon = @P6, s.last_receipt_id = @P7, s.updated_at_utc = @P8 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) FROM [DWH_State].[dpone].[dpone_source_state] AS s WHERE s.state_key = @P1 AND s.safe_xmin = @P2 AND s.revision = @P3 AND s.superseded_at_utc IS NULL; SELECT COUNT_BIG(*) AS affected FROM @dpone_out;

-- cas_insert
DECLARE @dpone_out TABLE (n bit NOT NULL); INSERT INTO [DWH_State].[dpone].[dpone_source_state] (state_key, target_identity, scope_hash, safe_xmin, revision, visible_horizon, last_receipt_id, created_at_utc, updated_at_utc) OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) SELECT @P1, @P2, @P3, @P4, @P5, @P6, @P7, @P8, @P8 WHERE NOT EXISTS (SELECT 1 FROM [DWH_State].[dpone].[dpone_source_state] AS s WITH (UPDLOCK, HOLDLOCK) WHERE s.state_key = @P1); SELECT COUNT_BIG(*) AS affected FROM @dpone_out;

-- insert_receipt
INSERT INTO [DWH_State].[dpone].[dpone_commit_receipt] (receipt_id, load_id, invocation_id, invocation_digest, state_key, previous_xmin, previous_revision, new_xmin, new_revision, body, committed_at_utc) VALUES (@P1, @P2, @P3, @P4, @P5, @P6, @P7, @P8, @P9, @P10, @P11);

-- consume_authority
INSERT INTO [DWH_State].[dpone].[dpone_repair_authority_consumption] (authority_id, authority_digest, state_key, load_id, receipt_id, consumed_at_utc) VALUES (@P1, @P2, @P3, @P4, @P5, @P6);

-- record_run
INSERT INTO [DWH_State].[dpone].[dpone_run_state] (run_id, invocation_id, state_key, status, code, evidence, recorded_at_utc) VALUES (@P1, @P2, @P3, @P4, @P5, @P6, SYSUTCDATETIME());

-- stage_drop
DROP TABLE IF EXISTS [DWH_Stage].[dpone].[rows_0123456789abcdef]; DROP TABLE IF EXISTS [DWH_Stage].[dpone].[keys_0123456789abcdef];

-- state_catalog_check
SELECT OBJECT_ID(N'[DWH_State].[dpone].[dpone_source_state]', N'U') AS source_state, OBJECT_ID(N'[DWH_State].[dpone].[dpone_run_state]', N'U') AS run, OBJECT_ID(N'[DWH_State].[dpone].[dpone_commit_receipt]', N'U') AS receipt, OBJECT_ID(N'[DWH_State].[dpone].[dpone_repair_authority]', N'U') AS repair_authority, OBJECT_ID(N'[DWH_State].[dpone].[dpone_repair_authority_consumption]', N'U') AS repair_consumption;

-- state_catalog_facts
WITH v (role, object_id) AS (SELECT N'source_state' AS role, OBJECT_ID(N'[DWH_State].[dpone].[dpone_source_state]', N'U') AS object_id UNION ALL SELECT N'run' AS role, OBJECT_ID(N'[DWH_State].[dpone].[dpone_run_state]', N'U') AS object_id UNION ALL SELECT N'receipt' AS role, OBJECT_ID(N'[DWH_State].[dpone].[dpone_commit_receipt]', N'U') AS object_id UNION ALL SELECT N'repair_authority' AS role, OBJECT_ID(N'[DWH_State].[dpone].[dpone_repair_authority]', N'U') AS object_id UNION ALL SELECT N'repair_consumption' AS role, OBJECT_ID(N'[DWH_State].[dpone].[dpone_repair_authority_consumption]', N'U') AS object_id) SELECT v.role AS role, N'column' AS kind, c.name AS name, ty.name AS item, CONVERT(int, c.max_length) AS n1, CONVERT(int, c.is_nullable) AS n2, CONVERT(nvarchar(4000), NULL) AS filter FROM v INNER JOIN sys.columns AS c ON c.object_id = v.object_id INNER JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id UNION ALL SELECT v.role, N'index', CONVERT(nvarchar(128), i.index_id), c.name, CONVERT(int, ic.key_ordinal), CONVERT(int, i.is_primary_key) + 2 * CONVERT(int, i.has_filter) + 4 * CONVERT(int, i.is_disabled), i.filter_definition FROM v INNER JOIN sys.indexes AS i ON i.object_id = v.object_id AND i.is_unique = 1 INNER JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal > 0 INNER JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id UNION ALL SELECT v.role, N'trigger', tr.name, te.type_desc, CONVERT(int, tr.is_disabled), CONVERT(int, tr.is_instead_of_trigger), NULL FROM v INNER JOIN sys.triggers AS tr ON tr.parent_id = v.object_id INNER JOIN sys.trigger_events AS te ON te.object_id = tr.object_id UNION ALL SELECT v.role, N'check', cc.name, N'', CONVERT(int, cc.is_disabled), CONVERT(int, cc.is_not_trusted), CONVERT(nvarchar(4000), cc.definition) FROM v INNER JOIN sys.check_constraints AS cc ON cc.parent_object_id = v.object_id UNION ALL SELECT v.role, N'foreign_key', fk.name, pc.name, CONVERT(int, fk.delete_referential_action) + 4 * CONVERT(int, fk.update_referential_action), CONVERT(int, fk.is_disabled) + 2 * CONVERT(int, fk.is_not_trusted), CONVERT(nvarchar(4000), rv.role + N'.' + rc.name) FROM v INNER JOIN sys.foreign_keys AS fk ON fk.parent_object_id = v.object_id INNER JOIN sys.foreign_key_columns AS fkc ON fkc.constraint_object_id = fk.object_id INNER JOIN sys.columns AS pc ON pc.object_id = fkc.parent_object_id AND pc.column_id = fkc.parent_column_id INNER JOIN sys.columns AS rc ON rc.object_id = fkc.referenced_object_id AND rc.column_id = fkc.referenced_column_id LEFT JOIN v AS rv ON rv.object_id = fk.referenced_object_id UNION ALL SELECT v.role, N'referenced_by', fk.name, N'', 0, 0, NULL FROM v INNER JOIN sys.foreign_keys AS fk ON fk.referenced_object_id = v.object_id WHERE NOT EXISTS (SELECT 1 FROM v AS w WHERE w.object_id = fk.parent_object_id) ORDER BY 1, 2, 3, 5;

-- select_state
SELECT state_key, target_identity, scope_hash, safe_xmin, revision, visible_horizon, last_receipt_id, CONVERT(int, CASE WHEN superseded_at_utc IS NULL THEN 0 ELSE 1 END) AS superseded FROM [DWH_State].[dpone].[dpone_source_state] WHERE state_key = @P1;

-- select_receipt_by_invocation
SELECT body FROM [DWH_State].[dpone].[dpone_commit_receipt] WHERE invocation_id = @P1 AND state_key = @P2;

-- select_receipt_by_load
SELECT body FROM [DWH_State].[dpone].[dpone_commit_receipt] WHERE load_id = @P1;

-- select_receipts
SELECT TOP (@P2) body FROM [DWH_State].[dpone].[dpone_commit_receipt] WHERE state_key = @P1 ORDER BY new_revision DESC;

-- select_authority
SELECT a.authority_id, a.recorded_digest, a.document, CONVERT(int, CASE WHEN EXISTS (SELECT 1 FROM [DWH_State].[dpone].[dpone_repair_authority_consumption] AS c WHERE c.authority_id = a.authority_id) THEN 1 ELSE 0 END) AS consumed FROM [DWH_State].[dpone].[dpone_repair_authority] AS a WHERE a.authority_id = @P1;

-- insert_failed_run
INSERT INTO [DWH_State].[dpone].[dpone_run_state] (run_id, invocation_id, state_key, status, code, evidence, recorded_at_utc) VALUES (@P1, @P2, @P3, @P4, @P5, @P6, SYSUTCDATETIME());

