#!/usr/bin/env bash
# One session with the HTTP service, with curl: create a session, upload a file, run a command
# that writes an artifact, read the run's status and the artifact, delete the session.
#
#   sandboxd serve &                     # or: cargo run -q -p sandboxd -- serve
#   B=http://127.0.0.1:8787/api/v1/sandbox examples/service_session.sh
#
# With authentication on, set AUTH="Authorization: Bearer <api key or JWT>".
set -euo pipefail
B=${B:-http://127.0.0.1:8787/api/v1/sandbox}
H=(-H "${AUTH:-X-Anonymous: 1}")
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

S=$(curl -sf "${H[@]}" -X POST "$B/sessions" -H 'content-type: application/json' \
    -d '{"spec_version":"1.0"}' | json '["session_id"]')
printf 'a,b\n1,2\n3,4\n' > "${TMPDIR:-/tmp}/data.csv"
curl -sf "${H[@]}" -X POST "$B/sessions/$S/files" -F "files[]=@${TMPDIR:-/tmp}/data.csv" >/dev/null
R=$(curl -sf "${H[@]}" -X POST "$B/runs" -H 'content-type: application/json' -d "{
      \"spec_version\": \"1.0\", \"session_id\": \"$S\",
      \"command\": [\"bash\", \"-c\", \"python3 -c 'import csv; print(sum(int(r[\\\"b\\\"]) for r in csv.DictReader(open(\\\"data.csv\\\"))))' | tee sum.txt\"],
      \"capture_patterns\": [\"sum.txt\"]}" | json '["run_id"]')
# Poll until the run is over (the live log is the WebSocket at .../runs/$R/stream).
for _ in $(seq 100); do
    PHASE=$(curl -sf "${H[@]}" "$B/runs/$R" | json '["phase"]')
    case $PHASE in completed|failed|timed_out|killed) break ;; esac
    sleep 0.1
done
echo "phase: $PHASE, exit: $(curl -sf "${H[@]}" "$B/runs/$R" | json '["exit_code"]')"
echo "artifacts: $(curl -sf "${H[@]}" "$B/runs/$R/artifacts" | json '["artifacts"][0]["path"]' 2>/dev/null || curl -sf "${H[@]}" "$B/runs/$R/artifacts")"
echo "sum.txt: $(curl -sf "${H[@]}" "$B/runs/$R/artifacts/sum.txt")"
curl -sf "${H[@]}" -X DELETE "$B/sessions/$S" >/dev/null && echo "session deleted"
