-- server_facts
SELECT CONVERT(nvarchar(128), SERVERPROPERTY('Babelfish')) AS babelfish, CONVERT(nvarchar(4000), @@VERSION) AS version_text, CONVERT(nvarchar(128), SERVERPROPERTY('ProductVersion')) AS product_version, CONVERT(int, SERVERPROPERTY('EngineEdition')) AS engine_edition;

-- metadata_permission
SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW ANY DATABASE') AS has_view_any_database;

-- catalog_rows
SELECT d.name AS name, d.database_id AS database_id, CAST(d.create_date AS datetime2(7)) AS create_date, CONVERT(varchar(36), r.database_guid) AS database_guid, d.state_desc AS state_desc, d.user_access_desc AS user_access_desc, HAS_DBACCESS(d.name) AS has_dbaccess FROM master.sys.databases AS d LEFT JOIN master.sys.database_recovery_status AS r ON r.database_id = d.database_id WHERE d.name COLLATE Latin1_General_100_CI_AI = @P1 COLLATE Latin1_General_100_CI_AI ORDER BY d.database_id;

-- session_identity
SELECT CONVERT(nvarchar(256), @@SERVERNAME) AS server_name, CONVERT(nvarchar(256), SERVERPROPERTY('MachineName')) AS machine_name, CONVERT(nvarchar(256), SERVERPROPERTY('InstanceName')) AS instance_name, CONVERT(nvarchar(256), SERVERPROPERTY('ProductVersion')) AS product_version, SUSER_SNAME() AS principal_name, SUSER_SID() AS principal_sid;

-- current_database
SELECT DB_ID() AS database_id, DB_NAME() AS database_name;

-- target_columns
SELECT c.name AS name, ty.name AS type_name, CONVERT(int, c.max_length) AS max_length, CONVERT(int, c.is_nullable) AS is_nullable, c.collation_name AS collation_name, CONVERT(int, c.is_computed) AS is_computed, CONVERT(int, ISNULL(cc.is_persisted, 0)) AS is_persisted, CONVERT(int, c.precision) AS type_precision, CONVERT(int, c.scale) AS type_scale, CONVERT(int, COLLATIONPROPERTY(c.collation_name, 'CodePage')) AS code_page FROM sys.columns AS c INNER JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id LEFT JOIN sys.computed_columns AS cc ON cc.object_id = c.object_id AND cc.column_id = c.column_id WHERE c.object_id = OBJECT_ID(@P1) ORDER BY c.column_id;

-- target_unique_indexes
SELECT i.index_id AS index_id, CONVERT(int, i.is_primary_key) AS is_primary_key, CONVERT(int, i.has_filter) AS has_filter, CONVERT(int, i.is_disabled) AS is_disabled, i.filter_definition AS filter_definition, c.name AS column_name FROM sys.indexes AS i INNER JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal > 0 INNER JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id WHERE i.object_id = OBJECT_ID(@P1) AND i.is_unique = 1 ORDER BY i.index_id, ic.key_ordinal;

-- target_triggers
SELECT CONVERT(int, COUNT(*)) AS instead_of_triggers, CONVERT(int, (SELECT COUNT(*) FROM sys.foreign_keys AS fk WHERE fk.referenced_object_id = OBJECT_ID(@P1) AND fk.is_disabled = 0 AND (fk.delete_referential_action <> 0 OR fk.update_referential_action <> 0))) AS cascading_references FROM sys.triggers AS tr WHERE tr.parent_id = OBJECT_ID(@P1) AND tr.is_disabled = 0 AND tr.is_instead_of_trigger = 1;

-- session_options
SET ANSI_NULLS ON; SET ANSI_PADDING ON; SET ANSI_WARNINGS ON; SET ARITHABORT ON; SET CONCAT_NULL_YIELDS_NULL ON; SET QUOTED_IDENTIFIER ON; SET NUMERIC_ROUNDABORT OFF;

-- set_xact_abort
SET XACT_ABORT ON;

-- set_serializable
SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;

-- begin
BEGIN TRANSACTION;

-- applock
DECLARE @rc int; EXEC @rc = sp_getapplock @Resource = @P1, @LockMode = N'Exclusive', @LockOwner = N'Transaction', @LockTimeout = 30000; SELECT @rc AS applock_status;

-- detection_time
SELECT DATEDIFF_BIG(MICROSECOND, CAST('1970-01-01T00:00:00' AS datetime2(7)), SYSUTCDATETIME()) AS detection_micros;

-- commit
COMMIT TRANSACTION;

-- rollback
IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;

-- stale_scratch_databases
SELECT name FROM sys.databases WHERE name LIKE N'dpone\_t\_%' ESCAPE N'\' AND create_date < DATEADD(MINUTE, -CONVERT(int, @P1), GETDATE()) ORDER BY name;

