#!/usr/bin/env python3
"""A Slack/Mattermost-style incoming-webhook receiver for the alerts test, on loopback.

Usage: webhook_receiver.py PORT_FILE LOG_FILE

Writes the port it listens on to PORT_FILE, then appends one JSON line per POST to LOG_FILE:
{"path", "status", "content_type", "body"}. Answers 200 "ok", except that the first POST to
/flaky gets 503 (a receiver that is briefly down) and every POST to /gone gets 404.
"""
import http.server
import json
import os
import sys
import threading

port_file, log_file = sys.argv[1], sys.argv[2]
lock = threading.Lock()
flaky_seen = False


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global flaky_seen
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode("utf-8", "replace")
        with lock:
            if self.path == "/flaky" and not flaky_seen:
                flaky_seen = True
                status = 503
            elif self.path == "/gone":
                status = 404
            else:
                status = 200
            with open(log_file, "a", encoding="utf-8") as log:
                log.write(json.dumps({"path": self.path, "status": status,
                                      "content_type": self.headers.get("Content-Type", ""),
                                      "body": body}) + "\n")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w", encoding="utf-8") as f:
    f.write(str(server.server_address[1]))
# Renamed into place, so a reader never sees half a port number.
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
