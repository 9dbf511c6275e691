"""One member of the real-engine ClickHouse test tier.

A real ClickHouse 26.9 engine (chdb, in process) behind the subset of the ClickHouse HTTP
interface that the `clickhouse` crate uses: the query in the body, in the `query` URL parameter
or in a multipart form with `param_*` fields; `database`, `default_format` and settings as URL
parameters; `X-ClickHouse-User` / `X-ClickHouse-Key` credentials; RowBinary in and out; errors as
`Code: N. DB::Exception: ...` bodies with the `X-ClickHouse-Exception-Code` header. With
`--tls-cert` and `--tls-key` (as the tier starts it) it speaks HTTPS only: each connection's
TLS handshake runs in that connection's own thread, so a client that stalls in it holds up no
other.

Everything a statement does runs on the real engine: catalog, KeeperMap CAS (against the
tier's ZooKeeper), CREATE ... UUID, loads with deduplication tokens, EXCHANGE / RENAME / DROP,
reads. The one emulated piece is `ON CLUSTER` DDL, which the engine refuses in process
(QUERY_IS_PROHIBITED): the member that receives it records one queue entry per cluster host in a
KeeperMap table that every member shares, each member's DDL worker thread executes its own
entries on its own engine and records the outcome, and the initiator waits for them with the
`throw` output mode's semantics. `system.distributed_ddl_queue` in a query is read from a view of
those rows with the real table's column types.

Fault injection for the tier's fault matrix: a rule posted to `/__tier/faults` is
`{"match": text or [texts], "action": A, "skip": n, "times": n, "stage": "request" | "ddl_worker",
"delay_ms": ms, "code": n}` and fires on the statements whose text (with `name=value` lines of
their bound parameters) contains every match text, after skipping `skip` of them. Actions:
`reset_before` (close the connection without executing), `error_before` (a server exception with
`code`, nothing executed), `delay_before` / `delay_after`, `exit_before` / `exit_after` (the
member process dies; its supervisor restarts it), `drop_after` (executed, then the connection is
closed without a response), `zk_stop_before` (ZooKeeper is stopped, then the statement runs).
Every firing is appended to `faults.jsonl` in the member's state directory, so a firing that
kills the process is still counted; `GET /__tier/faults` lists them.

This file belongs to the test tier only; the host never depends on it.
"""

import argparse
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import chdb.state.sqlitelike as chdb_sqlite

VERSION = "26.9.2.1"
HTTP_ONLY_PARAMS = {
    "query",
    "database",
    "default_format",
    "query_id",
    "user",
    "password",
    "session_id",
    "session_timeout",
    "session_check",
    "compress",
    "decompress",
    "role",
    "wait_end_of_query",
    "buffer_size",
    "quota_key",
}
# Session defaults of a ClickHouse server that the in-process engine sets differently.
SERVER_DEFAULTS = {"async_insert": "0"}
ON_CLUSTER = re.compile(
    r"\s+ON\s+CLUSTER\s+(`(?:[^`\\]|\\.)*`|[A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE
)
QUEUE_TABLE = "dpone_tier.ddl_queue_rows"
QUEUE_VIEW = "dpone_tier.distributed_ddl_queue"
QUEUE_SEQUENCE = "dpone_tier.ddl_queue_entries"
ERROR_NAMES = {
    159: "TIMEOUT_EXCEEDED",
    210: "NETWORK_ERROR",
    241: "MEMORY_LIMIT_EXCEEDED",
    392: "QUERY_IS_PROHIBITED",
    516: "AUTHENTICATION_FAILED",
}


def sql_string(value):
    out = ["'"]
    for ch in value:
        if ch in ("'", "\\"):
            out.append("\\")
        out.append(ch)
    out.append("'")
    return "".join(out)


class EngineError(Exception):
    def __init__(self, code, text):
        super().__init__(text)
        self.code = code
        self.text = text


def engine_error(exc):
    text = str(exc)
    m = re.match(r"\s*Code:\s*(\d+)", text)
    code = int(m.group(1)) if m else 1001
    if not m:
        text = f"Code: {code}. DB::Exception: {text}. (STD_EXCEPTION)"
    return EngineError(code, text)


class Engine:
    """The in-process engine, one statement at a time."""

    def __init__(self, data_dir, config):
        self.lock = threading.Lock()
        self.conn = chdb_sqlite.connect(f"{data_dir}?config-file={config}")
        for name, value in SERVER_DEFAULTS.items():
            self.conn.query(f"SET {name} = {sql_string(value)}")

    def _apply(self, settings, database):
        applied = []
        for name, value in settings.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise EngineError(115, f"Code: 115. DB::Exception: Unknown setting {name}. (UNKNOWN_SETTING)")
            self.conn.query(f"SET {name} = {sql_string(value)}")
            applied.append(name)
        if database:
            self.conn.query(f"USE `{database}`")
        return applied

    def _reset(self, applied, database):
        for name in applied:
            if name in SERVER_DEFAULTS:
                self.conn.query(f"SET {name} = {sql_string(SERVER_DEFAULTS[name])}")
            else:
                self.conn.query(f"SET {name} = DEFAULT")
        if database:
            self.conn.query("USE default")

    def query(self, sql, fmt="TSV", params=None, settings=None, database=None):
        with self.lock:
            applied = []
            try:
                applied = self._apply(settings or {}, database)
                result = self.conn.query(sql, fmt, params=params or {})
                return bytes(result.bytes()) if hasattr(result, "bytes") else b""
            except EngineError:
                raise
            except Exception as exc:  # the engine's own exception
                raise engine_error(exc) from None
            finally:
                try:
                    self._reset(applied, database)
                except Exception:
                    pass

    def insert(self, sql, fmt, chunks, settings=None, database=None):
        with self.lock:
            applied = []
            inserter = None
            try:
                applied = self._apply(settings or {}, database)
                inserter = self.conn.send_insert(sql, fmt)
                for chunk in chunks:
                    if chunk:
                        inserter.append(chunk)
                result = inserter.finish()
                inserter = None
                return result.rows_written
            except EngineError:
                raise
            except Exception as exc:
                raise engine_error(exc) from None
            finally:
                if inserter is not None:
                    try:
                        inserter.cancel()
                    except Exception:
                        pass
                try:
                    self._reset(applied, database)
                except Exception:
                    pass


class Faults:
    """Fault rules of this member; firings are appended to a file that survives the process."""

    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.rules = []
        self.next_id = 1
        self.log_path = log_path

    def add(self, rule):
        with self.lock:
            rule = dict(rule)
            rule["id"] = self.next_id
            rule.setdefault("times", 1)
            rule.setdefault("stage", "request")
            self.next_id += 1
            self.rules.append(rule)
            return rule["id"]

    def clear(self):
        with self.lock:
            self.rules = []

    def take(self, text, when, stage):
        """The first armed rule for this statement at this point, consumed and logged."""
        with self.lock:
            for rule in self.rules:
                if rule["times"] <= 0 or rule["stage"] != stage:
                    continue
                if not rule["action"].endswith(when):
                    continue
                needles = rule["match"] if isinstance(rule["match"], list) else [rule["match"]]
                if not all(n in text for n in needles):
                    continue
                if rule.get("skip", 0) > 0:
                    rule["skip"] -= 1
                    continue
                rule["times"] -= 1
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"id": rule["id"], "action": rule["action"], "match": rule["match"], "stage": stage}) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                return rule
        return None

    def fired(self):
        try:
            with open(self.log_path, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []


class Dropped(Exception):
    """The connection is closed without a response."""


def read_body(handler):
    """Yields the request body in chunks (Content-Length or chunked transfer coding)."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        while True:
            line = handler.rfile.readline(65537)
            if not line:
                raise Dropped()
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:
                    trailer = handler.rfile.readline(65537)
                    if trailer in (b"\r\n", b"\n", b""):
                        return
            remaining = size
            while remaining:
                data = handler.rfile.read(min(remaining, 1 << 20))
                if not data:
                    raise Dropped()
                remaining -= len(data)
                yield data
            handler.rfile.readline(3)
    else:
        remaining = int(handler.headers.get("Content-Length") or 0)
        while remaining:
            data = handler.rfile.read(min(remaining, 1 << 20))
            if not data:
                raise Dropped()
            remaining -= len(data)
            yield data


def parse_multipart(body, content_type):
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if not m:
        raise EngineError(36, "Code: 36. DB::Exception: multipart body without boundary. (BAD_ARGUMENTS)")
    boundary = b"--" + m.group(1).encode()
    fields = {}
    for part in body.split(boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, value = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        if name is None:
            continue
        if value.endswith(b"\r\n"):
            value = value[:-2]
        fields[name.group(1).decode()] = value.decode("utf-8")
    return fields


class Member:
    def __init__(self, args):
        with open(args.topology, encoding="utf-8") as f:
            self.topology = json.load(f)
        self.name = args.name
        me = self.topology["members"][self.name]
        self.host = me["host"]
        self.tcp_port = me["tcp_port"]
        self.state_dir = args.state_dir
        self.engine = Engine(args.data_dir, args.config)
        self.faults = Faults(os.path.join(self.state_dir, "faults.jsonl"))
        self.ensure_queue()

    def ensure_queue(self):
        self.engine.query("CREATE DATABASE IF NOT EXISTS dpone_tier ENGINE = Atomic")
        self.engine.query(
            f"CREATE TABLE IF NOT EXISTS {QUEUE_TABLE} ("
            "k String, entry String, entry_version Nullable(UInt8), initiator_host Nullable(String), "
            "initiator_port Nullable(UInt16), cluster String, query String, settings Map(String, String), "
            "query_create_time DateTime, host Nullable(String), port Nullable(UInt16), "
            "status Nullable(Enum8('Inactive' = 0, 'Active' = 1, 'Finished' = 2, 'Removing' = 3, 'Unknown' = 4)), "
            "exception_code Nullable(UInt16), exception_text Nullable(String), "
            "query_finish_time Nullable(DateTime), query_duration_ms Nullable(UInt64), local_query String"
            ") ENGINE = KeeperMap('/dpone_tier/ddl_queue') PRIMARY KEY k"
        )
        self.engine.query(
            f"CREATE TABLE IF NOT EXISTS {QUEUE_SEQUENCE} (entry String) "
            "ENGINE = KeeperMap('/dpone_tier/ddl_queue_entries') PRIMARY KEY entry"
        )
        self.engine.query(
            f"CREATE VIEW IF NOT EXISTS {QUEUE_VIEW} AS SELECT entry, entry_version, initiator_host, "
            "initiator_port, cluster, query, settings, query_create_time, host, port, status, "
            f"exception_code, exception_text, query_finish_time, query_duration_ms FROM {QUEUE_TABLE}"
        )

    def credentials_ok(self, handler, params):
        user = handler.headers.get("X-ClickHouse-User") or params.get("user") or "default"
        password = handler.headers.get("X-ClickHouse-Key") or params.get("password") or ""
        return user == self.topology["user"] and password == self.topology["password"]

    # --- ON CLUSTER (the emulated piece) ---

    def on_cluster(self, sql, settings):
        m = ON_CLUSTER.search(sql)
        cluster = m.group(1)
        if cluster.startswith("`"):
            cluster = re.sub(r"\\(.)", r"\1", cluster[1:-1])
        hosts = self.topology["clusters"].get(cluster)
        if hosts is None:
            raise EngineError(701, f"Code: 701. DB::Exception: Requested cluster '{cluster}' not found. (CLUSTER_DOESNT_EXIST)")
        local = sql[: m.start()] + sql[m.end():]
        entry = self.next_entry()
        kept = {k: v for k, v in settings.items() if k not in ("distributed_ddl_task_timeout",)}
        rows = []
        for h in hosts:
            member = self.topology["members"][h]
            rows.append(
                "({k}, {entry}, 5, {ih}, {ip}, {cluster}, {query}, {settings}, now(), {host}, {port}, 'Inactive', NULL, NULL, NULL, NULL, {local})".format(
                    k=sql_string(f"{entry}/{member['host']}:{member['tcp_port']}"),
                    entry=sql_string(entry),
                    ih=sql_string(self.host),
                    ip=self.tcp_port,
                    cluster=sql_string(cluster),
                    query=sql_string(sql),
                    settings="map(" + ", ".join(f"{sql_string(k)}, {sql_string(v)}" for k, v in sorted(kept.items())) + ")" if kept else "map()",
                    host=sql_string(member["host"]),
                    port=member["tcp_port"],
                    local=sql_string(local),
                )
            )
        self.engine.query(f"INSERT INTO {QUEUE_TABLE} VALUES " + ", ".join(rows))
        timeout = float(settings.get("distributed_ddl_task_timeout", "180"))
        deadline = time.monotonic() + timeout
        while True:
            try:
                out = self.engine.query(
                    f"SELECT host, port, toString(status), ifNull(exception_code, 0), ifNull(exception_text, '') "
                    f"FROM {QUEUE_TABLE} WHERE entry = {{e:String}} ORDER BY host, port",
                    "JSONCompact",
                    params={"e": entry},
                )
                data = json.loads(out)["data"]
            except EngineError:
                data = []
            if data and all(r[2] == "Finished" for r in data):
                failed = [r for r in data if int(r[3]) != 0]
                if failed and settings.get("distributed_ddl_output_mode", "throw") != "never_throw":
                    r = failed[0]
                    raise EngineError(int(r[3]), f"Code: {int(r[3])}. DB::Exception: There was an error on [{r[0]}:{r[1]}]: {r[4]}")
                return "".join(f"{r[0]}\t{r[1]}\t{r[3]}\t\t0\t0\n" for r in data).encode()
            if time.monotonic() >= deadline:
                raise EngineError(
                    159,
                    f"Code: 159. DB::Exception: Distributed DDL task /clickhouse/task_queue/ddl/{entry} is not finished on some hosts; "
                    "they are executing it in the background. (TIMEOUT_EXCEEDED)",
                )
            time.sleep(0.05)

    def next_entry(self):
        """A queue entry name no other initiator holds: claimed by a strict-mode KeeperMap insert
        (as a server's sequential Keeper node would be), so concurrent DDL never shares one."""
        existing = self.engine.query(f"SELECT count() FROM {QUEUE_SEQUENCE}").strip()
        n = int(existing or b"0") + 1
        while True:
            entry = "query-%010d" % n
            try:
                self.engine.query(
                    f"INSERT INTO {QUEUE_SEQUENCE} SETTINGS keeper_map_strict_mode = 1 SELECT {{e:String}}",
                    params={"e": entry},
                )
                return entry
            except EngineError:
                n += 1

    def ddl_worker(self):
        """Executes this member's queue entries, as a server's DDL worker does."""
        while True:
            time.sleep(0.1)
            try:
                out = self.engine.query(
                    f"SELECT k, local_query FROM {QUEUE_TABLE} WHERE host = {{h:String}} AND port = {{p:UInt16}} "
                    "AND status = 'Inactive' ORDER BY entry",
                    "JSONCompact",
                    params={"h": self.host, "p": str(self.tcp_port)},
                )
                pending = json.loads(out)["data"]
            except Exception:
                continue
            for key, local in pending:
                rule = self.faults.take(local, "before", "ddl_worker")
                if rule is not None and rule["action"] in ("exit_before", "delay_before"):
                    self.act_before(rule, None)
                try:
                    self.engine.query(f"ALTER TABLE {QUEUE_TABLE} UPDATE status = 'Active' WHERE k = {{k:String}}", params={"k": key})
                except EngineError:
                    continue
                started = time.monotonic()
                code, text = 0, ""
                try:
                    self.engine.query(local)
                except EngineError as exc:
                    code, text = exc.code, exc.text
                try:
                    self.engine.query(
                        f"ALTER TABLE {QUEUE_TABLE} UPDATE status = 'Finished', exception_code = {{c:UInt16}}, "
                        "exception_text = {t:String}, query_finish_time = now(), query_duration_ms = {d:UInt64} WHERE k = {k:String}",
                        params={"c": str(code), "t": text, "d": str(int((time.monotonic() - started) * 1000)), "k": key},
                    )
                except EngineError:
                    pass

    # --- fault actions ---

    def act_before(self, rule, handler):
        action = rule["action"]
        if action == "exit_before":
            os._exit(137)
        if action == "zk_stop_before":
            subprocess.run(["bash", os.path.join(os.path.dirname(self.state_dir), "ctl"), "zk-stop"], check=False)
            return
        if action == "delay_before":
            time.sleep(rule.get("delay_ms", 1000) / 1000.0)
            return
        if action == "reset_before":
            raise Dropped()
        if action == "error_before":
            code = int(rule.get("code", 210))
            name = ERROR_NAMES.get(code, "INJECTED_FAULT")
            raise EngineError(code, f"Code: {code}. DB::Exception: Injected by the test tier. ({name})")

    def act_after(self, rule):
        action = rule["action"]
        if action == "exit_after":
            os._exit(137)
        if action == "drop_after":
            raise Dropped()
        if action == "delay_after":
            time.sleep(rule.get("delay_ms", 1000) / 1000.0)


def make_handler(member):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "ClickHouse-tier"
        # Headers and body leave in separate writes; without TCP_NODELAY every response of a
        # kept-alive connection waits for the client's delayed acknowledgement.
        disable_nagle_algorithm = True

        def log_message(self, fmt, *args):
            pass

        def send(self, status, body, headers=None):
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

        def send_error_text(self, exc):
            status = {516: 401, 60: 404, 81: 404, 62: 400}.get(exc.code, 500)
            body = (exc.text.rstrip() + f" (version {VERSION})\n").encode("utf-8", "replace")
            self.send(status, body, {"X-ClickHouse-Exception-Code": str(exc.code), "Content-Type": "text/plain; charset=UTF-8"})

        def drop(self):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def do_GET(self):
            self.handle_request()

        def do_POST(self):
            self.handle_request()

        def control(self, path, body):
            if path == "/__tier/faults":
                if self.command == "POST":
                    rid = member.faults.add(json.loads(body or b"{}"))
                    return self.send(200, json.dumps({"id": rid}).encode())
                if self.command == "GET":
                    return self.send(200, json.dumps({"fired": member.faults.fired()}).encode())
            if path == "/__tier/faults/clear" and self.command == "POST":
                member.faults.clear()
                return self.send(200, b"{}")
            if path == "/__tier/info":
                return self.send(200, json.dumps({"pid": os.getpid(), "member": member.name, "tcp_port": member.tcp_port}).encode())
            return self.send(404, b"unknown control path\n")

        def handle_request(self):
            url = urlsplit(self.path)
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            try:
                if url.path in ("/ping", "/") and self.command == "GET" and "query" not in params:
                    return self.send(200, b"Ok.\n")
                if url.path.startswith("/__tier/"):
                    return self.control(url.path, b"".join(read_body(self)))
                if not member.credentials_ok(self, params):
                    b"".join(read_body(self))
                    raise EngineError(516, "Code: 516. DB::Exception: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)")
                self.execute(params)
            except Dropped:
                self.drop()
            except EngineError as exc:
                self.send_error_text(exc)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            except Exception as exc:  # a defect of the tier itself
                traceback.print_exc(file=sys.stderr)
                self.send_error_text(EngineError(1001, f"Code: 1001. DB::Exception: tier failure {type(exc).__name__}. (STD_EXCEPTION)"))

        def execute(self, params):
            query_param = params.get("query")
            content_type = self.headers.get("Content-Type", "")
            query_params = {}
            body_iter = read_body(self)
            insert_data = None
            if query_param is not None and query_param.lstrip().upper().startswith("INSERT"):
                sql = query_param
                insert_data = body_iter
            else:
                body = b"".join(body_iter)
                if content_type.startswith("multipart/form-data"):
                    fields = parse_multipart(body, content_type)
                    sql = fields.pop("query", "")
                    query_params = {k[len("param_"):]: v for k, v in fields.items() if k.startswith("param_")}
                else:
                    sql = (query_param + ("\n" if query_param and body else "") if query_param else "") + body.decode("utf-8")
            query_params.update({k[len("param_"):]: v for k, v in params.items() if k.startswith("param_")})
            settings = {k: v for k, v in params.items() if k not in HTTP_ONLY_PARAMS and not k.startswith("param_")}
            database = params.get("database") or self.headers.get("X-ClickHouse-Database")
            fmt = params.get("default_format") or self.headers.get("X-ClickHouse-Format") or "TabSeparated"
            query_id = params.get("query_id", "")
            # Faults match the statement text and its bound parameters.
            fault_text = sql + "".join(f"\n{k}={v}" for k, v in sorted(query_params.items()))
            rule = member.faults.take(fault_text, "before", "request")
            if rule is not None:
                member.act_before(rule, self)
            headers = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Format": fmt, "Content-Type": "application/octet-stream"}
            if insert_data is not None:
                m = re.match(r"(?is)\s*(INSERT\s+INTO\s+.*?)\s+FORMAT\s+(\w+)\s*$", sql)
                if not m:
                    raise EngineError(62, "Code: 62. DB::Exception: the tier accepts INSERT ... FORMAT <fmt> with the data in the body. (SYNTAX_ERROR)")
                rows = member.engine.insert(m.group(1), m.group(2), insert_data, settings, database)
                body = b""
                headers["X-ClickHouse-Summary"] = json.dumps({"written_rows": str(rows)})
            elif ON_CLUSTER.search(sql):
                body = member.on_cluster(sql, settings)
            else:
                sql = sql.replace("system.distributed_ddl_queue", QUEUE_VIEW)
                body = member.engine.query(sql, fmt, query_params, settings, database)
            rule = member.faults.take(fault_text, "after", "request")
            if rule is not None:
                member.act_after(rule)
            self.send(200, body, headers)

    return Handler


class MemberServer(ThreadingHTTPServer):
    """The member's HTTP server; with a TLS context, HTTPS only."""

    def __init__(self, address, handler, tls):
        self.tls = tls
        super().__init__(address, handler)

    def finish_request(self, request, client_address):
        # Runs in the connection's own thread: the handshake blocks no other connection.
        if self.tls is None:
            return super().finish_request(request, client_address)
        request.settimeout(30)
        try:
            conn = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # a client that does not complete the handshake gets nothing
        conn.settimeout(None)
        try:
            super().finish_request(conn, client_address)
        finally:
            # The wrapped socket owns the connection now (the plain one is detached).
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--topology", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--http-port", type=int, required=True)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    args = p.parse_args()
    member = Member(args)
    threading.Thread(target=member.ddl_worker, daemon=True).start()
    if (args.tls_cert is None) != (args.tls_key is None):
        p.error("--tls-cert and --tls-key go together")
    tls = None
    if args.tls_cert is not None:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.minimum_version = ssl.TLSVersion.TLSv1_2
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    server = MemberServer(("127.0.0.1", args.http_port), make_handler(member), tls)
    server.daemon_threads = True
    with open(os.path.join(args.state_dir, "ready"), "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    server.serve_forever()


if __name__ == "__main__":
    main()
