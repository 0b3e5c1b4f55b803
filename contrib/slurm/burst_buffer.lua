-- SPDX-License-Identifier: Apache-2.0
--
-- burst_buffer.lua - the tierd provider for Slurm's burst_buffer/lua plugin (Slurm 22.05 and
-- later; the plugin embeds Lua 5.1). A job asks for tierd with directives in its script:
--
--   #BB_LUA tierd pool=tierd capacity=40G stage=/datasets/imagenet bw=800M class=training
--   #BB_LUA tierd stage_out=/ckpt/run7
--
-- and Slurm then holds it pending until its datasets are staged into the hot tier, starts it,
-- and keeps it in stage-out until its checkpoints are durable in the object store. tierd's
-- control API does the work (POST/GET/DELETE /v1/jobs, POST /v1/wait: docs/API.md); this script
-- only maps Slurm's hooks onto it. Set-up, the directives and many nodes: docs/SLURM.md.
--
-- (Slurm requires pool= with capacity=; this plugin has no default pool.) Install: this file as
-- burst_buffer.lua next to slurm.conf, `BurstBufferType=burst_buffer/lua` in slurm.conf, and on
-- the controller the packages curl and lua-cjson (lua-posix is optional: it gives hook timings in milliseconds and sleeps
-- without a fork). Settings come from tierd_bb.conf next to this file (KEY = VALUE lines, `#`
-- comments; every key is optional; see DEFAULTS below).
--
-- Hooks and what they do (S: called synchronously by slurmctld with its locks held, so they make
-- at most one bounded request; A: run in a separate process, killed at burst_buffer.conf's
-- StageInTimeout, StageOutTimeout or OtherTimeout):
--   slurm_bb_job_process  S  at submit: parse and check the directives (class= against
--                            user_classes: here only, so a job accepted before the list was
--                            narrowed runs its later hooks as usual), then ask tierd to check
--                            the request (dry_run: namespaces, could it ever fit; no backend
--                            I/O); a bad one is refused with a message sbatch prints. A tierd
--                            that does not answer within sync_timeout does not refuse the job
--                            (setup will say what is wrong)
--   slurm_bb_pools        S  the pool (tierd's capacity_bytes: what jobs may reserve); Slurm
--                            itself counts the jobs' capacity against it and queues on it
--   slurm_bb_setup        A  reconciliation first: tierd's jobs of Slurm jobs that have ended
--                            or are forgotten (a teardown that never reached tierd) are released
--                            (reconcile below; setting reconcile = no turns it off). Then
--                            admission: POST /v1/jobs with the size Slurm granted. A 409 "queued"
--                            (pins outside jobs took space since the last pools) is not a failure:
--                            data_in waits for the admission
--   slurm_bb_data_in      A  waits until the job is admitted and its stage paths are staged (the
--                            job stays pending meanwhile); fails with tierd's error if staging fails
--   slurm_bb_real_size    A  nothing (the job keeps the capacity it asked for)
--   slurm_bb_paths        S  the job's environment: TIERD_TENANT, TIERD_MOUNT, TIERD_STAGE,
--                            TIERD_STAGE_OUT (no request)
--   slurm_bb_pre_run      A  with node_url set: reconciles, admits and stages the job on each of
--                            its nodes' tierd (TCP with the token); a job on more than one node
--                            is staged cluster-wide there ("cluster": true; cluster_stage = auto):
--                            each node stages its own share and each block is fetched from the
--                            object store once, by the node that owns it. Else checks the job is
--                            still staged
--   slurm_bb_post_run     A  nothing
--   slurm_bb_data_out     A  waits (POST /v1/wait, 20 s at a time) until every file under each
--                            stage_out path is durable in the backend; the job stays in stage-out
--                            until then, and is not reported complete while bytes are only on
--                            the node
--   slurm_bb_job_teardown A  releases the job (DELETE /v1/jobs/ID; also with hurry)
--   slurm_bb_get_status   A  `scontrol show bbstat [JOBID]`: tierd's jobs and capacity
--
-- Every hook returns slurm.SUCCESS or slurm.ERROR and a message (Slurm shows it in the job's
-- reason or at sbatch). A Lua error inside a hook is caught and returned as slurm.ERROR.

local lua_script_name = "burst_buffer.lua (tierd)"

local DEFAULTS = {
    socket = "/run/tierd/api.sock", -- tierd's control API on this host (Unix socket)
    url = "", -- or its TCP address, e.g. https://storage-ctl:7070 (then token_file)
    token_file = "", -- file holding the bearer token for url and node_url
    cacert = "", -- CA for an https url or node_url
    node_url = "", -- e.g. https://%s:7070: pre_run admits the job on each node (%s = NodeAddr)
    mount = "/mnt/tierd", -- tierd's mount point on the nodes (TIERD_MOUNT)
    pool = "tierd", -- the pool name Slurm sees
    curl = "/usr/bin/curl",
    scontrol = "/usr/bin/scontrol",
    squeue = "/usr/bin/squeue",
    request_timeout = "10", -- seconds for one request of an asynchronous hook
    sync_timeout = "0.5", -- seconds for the one request of job_process and pools (slurmctld
    -- holds its job lock meanwhile)
    poll_interval = "0.25", -- seconds between two looks at a staging
    wait_step = "20", -- seconds of one POST /v1/wait in data_out
    check_at_submit = "yes", -- ask tierd to check the request at sbatch (no: syntax only)
    user_tenants = "no", -- yes: jobs may name their tenant (tenant=NAME; any user, any tenant)
    user_classes = "training,background", -- the classes a job may ask for with class= (at
    -- submission; a class's share of each link and who yields to whom are tierd's: inference
    -- and checkpoint take precedence over the others, so they are the admin's to hand out)
    job_prefix = "", -- prepended to Slurm's job id in tierd (clusters sharing one tierd)
    reconcile = "yes", -- setup and pre_run release tierd's jobs of ended Slurm jobs (no: never)
    cluster_stage = "auto", -- with node_url, a job on more than one node is staged cluster-wide
    -- (each block fetched once, by the node that owns it; a node in no tierd cluster stages it
    -- alone); no: every node fetches the whole stage set itself
    timing_log = "", -- append "HOOK JOBID MILLISECONDS RC END" per hook call (END: epoch s)
}

local KEYS = {
    tierd = true, -- the marker word, no value
    pool = "the burst-buffer pool (Slurm's own key; default the configured pool)",
    capacity = "hot-tier space to reserve, e.g. 40G",
    stage = "mount paths to stage in before the job starts",
    stage_out = "mount paths in write-back namespaces to make durable before the job ends",
    bw = "backend bandwidth to reserve, e.g. 800M or 800MiB/s",
    class = "inference, training, checkpoint or background",
    tenant = "tenant name for the job's I/O (default slurm-JOBID; only with user_tenants = yes)",
}
local KEY_LIST = "capacity, stage, stage_out, bw, class, tenant, pool"
local CLASSES = { inference = true, training = true, checkpoint = true, background = true }
local CLASS_LIST = "inference, training, checkpoint, background"
-- the names tierd still reads for two classes (renamed: interactive -> inference, streaming ->
-- training)
local LEGACY_CLASSES = { interactive = "inference", streaming = "training" }

-- ---- settings --------------------------------------------------------------------------------

-- The directory of this script (slurm.conf's, where the plugin loads it from).
local function script_dir()
    local src = debug.getinfo(1, "S").source or ""
    local d = src:match("^@(.*)/[^/]*$")
    return d or "."
end

local DIR = script_dir()
local C -- the settings; read again at every hook call (the plugin may keep its Lua state)
local USER_CLASSES -- {[class] = true} from C.user_classes
local USER_CLASSES_ERR -- why C.user_classes was not taken (then USER_CLASSES is the default's)

-- The set of classes a user_classes value lists (any case; the legacy names are read as their
-- new ones), or nil and the first word that is no class.
local function class_set(list)
    local set = {}
    for w in list:gmatch("[^%s,]+") do
        local cl = w:lower()
        cl = LEGACY_CLASSES[cl] or cl
        if not CLASSES[cl] then
            return nil, w
        end
        set[cl] = true
    end
    return set
end

local function load_conf()
    C = {}
    for k, v in pairs(DEFAULTS) do
        C[k] = v
    end
    local path = DIR .. "/tierd_bb.conf"
    local line_of = {} -- key -> its line in tierd_bb.conf
    local f = io.open(path, "r")
    if f then
        local n = 0
        for line in f:lines() do
            n = n + 1
            local s = line:gsub("^%s+", ""):gsub("%s+$", "")
            if s ~= "" and s:sub(1, 1) ~= "#" then
                local k, v = s:match("^([%w_]+)%s*=%s*(.-)$")
                if not k or DEFAULTS[k] == nil then
                    f:close()
                    error(string.format("%s:%d: '%s' is not KEY = VALUE with a known key", path,
                        n, s), 0)
                end
                C[k] = v
                line_of[k] = n
            end
        end
        f:close()
    end
    -- A bad user_classes refuses new jobs (slurm_bb_job_process, the one hook that reads it)
    -- and nothing else: the hooks of jobs already accepted, teardown and reconciliation above
    -- all, go on with the default list
    local bad
    USER_CLASSES, bad = class_set(C.user_classes)
    USER_CLASSES_ERR = nil
    if not USER_CLASSES then
        USER_CLASSES_ERR = string.format("%s:%d: user_classes = %s: '%s' is not a class (list " ..
            "some of %s, separated by commas)", path, line_of.user_classes or 0, C.user_classes,
            bad, CLASS_LIST)
        slurm.log_error("%s: %s; new jobs are refused until it is fixed", lua_script_name,
            USER_CLASSES_ERR)
        USER_CLASSES = class_set(DEFAULTS.user_classes)
    end
    if C.cluster_stage ~= "auto" and C.cluster_stage ~= "no" then
        -- every node staging the whole set is what a job gets without a tierd cluster: safe
        slurm.log_error("%s: %s:%d: cluster_stage = %s is neither auto nor no: taken as no",
            lua_script_name, path, line_of.cluster_stage or 0, C.cluster_stage)
        C.cluster_stage = "no"
    end
    if C.job_prefix:match("%d$") and C.reconcile ~= "no" then
        -- "c1" + job 23 and "c12" + job 3 would both be "c123": reconciliation could take one
        -- cluster's job for the other's. Only it is turned off (every other hook works as
        -- before: jobs in flight must still stage out and be released)
        C.reconcile = "no"
        slurm.log_error("%s: %s: job_prefix = %s ends in a digit, so tierd's jobs are not " ..
            "reconciled: end it with a letter or a separator (c1. or c1-), and give each " ..
            "cluster sharing a tierd its own", lua_script_name, path, C.job_prefix)
    end
    return C
end

local posix_time
do
    local ok, m = pcall(require, "posix.time")
    if ok then
        posix_time = m
    end
end

local cjson_ok, cjson = pcall(require, "cjson")

-- Monotonic milliseconds (lua-posix), else /proc/uptime's hundredths.
local function now_ms()
    if posix_time then
        local t = posix_time.clock_gettime(posix_time.CLOCK_MONOTONIC)
        return t.tv_sec * 1000 + t.tv_nsec / 1e6
    end
    local f = io.open("/proc/uptime", "r")
    local up = f and f:read("*n") or 0
    if f then
        f:close()
    end
    return up * 1000
end

local function sleep_s(secs)
    if posix_time then
        local whole = math.floor(secs)
        posix_time.nanosleep({ tv_sec = whole, tv_nsec = math.floor((secs - whole) * 1e9) })
    else
        os.execute("sleep " .. string.format("%.3f", secs))
    end
end

-- ---- HTTP to tierd (curl, configured through a private file) --------------------------------

-- A value for a curl config file: double-quoted with \ and " escaped.
local function cq(s)
    return '"' .. tostring(s):gsub("[\\\"]", "\\%0"):gsub("\n", "\\n") .. '"'
end

local function read_file(path)
    local f = io.open(path, "r")
    if not f then
        return nil
    end
    local s = f:read("*a")
    f:close()
    return s
end

-- A target: {base = "http://tierd", socket = PATH} or {base = URL, token = TOKEN}.
local function local_target()
    if C.url ~= "" then
        local tok = C.token_file ~= "" and read_file(C.token_file) or nil
        if C.token_file ~= "" and not tok then
            return nil, "cannot read token_file " .. C.token_file
        end
        return { base = C.url:gsub("/+$", ""), token = tok and tok:match("^%s*(.-)%s*$"),
            what = C.url }
    end
    return { base = "http://tierd", socket = C.socket, what = C.socket }
end

-- request(target, METHOD, PATH, BODY-TABLE-OR-NIL, TIMEOUT-S) -> status (number; 0: no answer),
-- decoded body (table or nil), text (the raw body or curl's error).
local function request(t, method, path, body, timeout)
    if not cjson_ok then
        return 0, nil, "lua-cjson is not installed on the controller (apt install lua-cjson)"
    end
    -- mkstemp: mode 0600, owned by SlurmUser (who may read token_file anyway), so the token and
    -- the user's paths are on no command line
    local cfg = os.tmpname()
    local f = assert(io.open(cfg, "w"))
    f:write("silent\nshow-error\n")
    f:write("stderr = \"-\"\n") -- curl's errors on stdout, before the status: no second file
    f:write("noproxy = \"*\"\n") -- never through an http_proxy of slurmctld's environment
    f:write("request = ", cq(method), "\n")
    f:write("url = ", cq(t.base .. path), "\n")
    f:write("max-time = ", cq(timeout or C.request_timeout), "\n")
    f:write("connect-timeout = \"5\"\n")
    f:write("output = \"-\"\n")
    f:write("write-out = \"\\n%{http_code}\"\n")
    if t.socket then
        f:write("unix-socket = ", cq(t.socket), "\n")
    end
    if t.token then
        f:write("header = ", cq("Authorization: Bearer " .. t.token), "\n")
    end
    if C.cacert ~= "" then
        f:write("cacert = ", cq(C.cacert), "\n")
    end
    if body then
        f:write("header = \"Content-Type: application/json\"\n")
        f:write("data-raw = ", cq(cjson.encode(body)), "\n")
    end
    f:close()
    -- -q first: no ~/.curlrc
    local p = io.popen(C.curl .. " -q -K " .. cfg .. " 2>/dev/null", "r")
    local out = p and p:read("*a") or ""
    if p then
        p:close()
    end
    os.remove(cfg)
    local text, code = out:match("^(.*)\n(%d%d%d)$")
    code = tonumber(code) or 0
    if code == 0 then
        local err = (text or out):gsub("%s+$", "")
        return 0, nil, "cannot reach tierd at " .. t.what .. ": " ..
            (err ~= "" and err or "no answer")
    end
    local ok, obj = pcall(cjson.decode, text)
    if not ok or type(obj) ~= "table" then
        obj = nil
    end
    return code, obj, text
end

-- The error tierd gave (its "error" field), else the text.
local function why(obj, text)
    if obj and type(obj.error) == "string" then
        return obj.error
    end
    return (text or ""):sub(1, 300)
end

-- Is an answer worth asking again (tierd restarting, unreachable, busy), rather than final?
-- 503 is final when it means tierd runs without the feature (EOPNOTSUPP: a config, not a moment).
local function transient(code, obj)
    if code == 0 or code == 502 or code == 504 then
        return true
    end
    return code == 503 and not (obj and (obj.errno == "EOPNOTSUPP" or obj.errno == "ENOTSUP"))
end

-- ---- directives ------------------------------------------------------------------------------

-- The units Slurm 22.05 takes after capacity= (suffix_mult): K, KiB = 1024, KB = 1000, and so
-- on to P; any case.
local SIZE_UNITS = { [""] = 1 }
for i, u in ipairs({ "k", "m", "g", "t", "p" }) do
    SIZE_UNITS[u] = 1024 ^ i
    SIZE_UNITS[u .. "ib"] = 1024 ^ i
    SIZE_UNITS[u .. "b"] = 1000 ^ i
end

-- A size as Slurm reads capacity=: an integer and one of those units; nil for anything Slurm
-- would read otherwise (decimals, other units: Slurm would ignore the unit) or above 2^53 (the
-- largest integer a Lua 5.1 number holds exactly).
local function parse_size(s)
    local num, unit = s:match("^(%d+)(%a*)$")
    local mult = num and SIZE_UNITS[unit:lower()]
    if not mult then
        return nil
    end
    local n = tonumber(num) * mult
    if n <= 0 or n > 2 ^ 53 then
        return nil
    end
    return n
end

-- A byte count as tierd takes it: a decimal string (cjson would write 1e+14 for large numbers).
local function bytes_str(n)
    return string.format("%.0f", n)
end

local function valid_path(p)
    return p:sub(1, 1) == "/" and not p:find("%z") and not p:find("//", 1, true) and
        not p:find("/%.%.?/") and not p:find("/%.%.?$") and #p < 4096
end

-- The job's #BB_LUA directives as Slurm 22.05 reads them (_xlate_batch): the script's lines up
-- to the first one that does not start with '#' (empty lines skipped), those starting with
-- "#BB_LUA", a line ending in '\' continued by the next #BB_LUA line. Returns a list of
-- {n = first line number, text = the directive's words}, or nil and a message.
local function directive_lines(script)
    local f, e = io.open(script, "r")
    if not f then
        return nil, "cannot read the job script: " .. tostring(e)
    end
    local out, n, cont = {}, 0, false
    for line in f:lines() do
        n = n + 1
        if line ~= "" then
            if line:sub(1, 1) ~= "#" then
                break -- Slurm stops at the first line that is not a comment
            end
            local rest = line:match("^#BB_LUA(.*)$")
            if not rest then
                cont = false
            else
                local joined = rest:sub(-1) == "\\"
                if joined then
                    rest = rest:sub(1, -2)
                end
                if cont then
                    out[#out].text = out[#out].text .. rest
                else
                    out[#out + 1] = { n = n, text = rest }
                end
                cont = joined
            end
        end
    end
    f:close()
    return out
end

-- parse(script path) -> spec, or nil and the message the user sees. spec = {lines = N,
-- capacity = bytes or nil, stage = {...}, stage_out = {...}, bw, class, tenant, pool}.
local function parse(script)
    local dl, e = directive_lines(script)
    if not dl then
        return nil, e
    end
    local spec = { stage = {}, stage_out = {}, lines = #dl }
    local n = 0
    local function bad(msg)
        return nil, string.format("#BB_LUA line %d: %s", n, msg)
    end
    for _, d in ipairs(dl) do
        n = d.n
        local rest = d.text
        if rest ~= "" and not rest:match("^ ") then
            return bad("'#BB_LUA' must be followed by a space")
        end
        if rest:find("[\t\r\v\f]") then
            return bad("separate the keys with spaces (Slurm does not take tabs or " ..
                "carriage returns there: save the script with Unix line ends)")
        end
        for tok in rest:gmatch("[^ ]+") do
            if tok ~= "tierd" then
                local k, v = tok:match("^([%w_]+)=(.*)$")
                if not k then
                    return bad(string.format("'%s' is not KEY=VALUE (keys: %s)", tok, KEY_LIST))
                end
                if not KEYS[k] or k == "tierd" then
                    return bad(string.format("unknown key '%s' (keys: %s)", k, KEY_LIST))
                end
                if v == "" then
                    return bad(string.format("%s= has no value (%s)", k, KEYS[k]))
                end
                if k == "stage" or k == "stage_out" then
                    for p in (v .. ","):gmatch("([^,]*),") do
                        if not valid_path(p) then
                            return bad(string.format(
                                "%s path '%s' must be an absolute mount path like " ..
                                "/datasets/imagenet (no '.', '..' or '//')", k, p))
                        end
                        table.insert(spec[k], p)
                    end
                    if #spec[k] > 64 then
                        return bad(string.format("more than 64 %s paths", k))
                    end
                else
                    if spec[k] ~= nil then
                        return bad(string.format("%s= given twice", k))
                    end
                    if k == "capacity" then
                        spec.capacity = parse_size(v)
                        if not spec.capacity then
                            return bad(string.format("capacity=%s is not a size (an " ..
                                "integer and K, M, G, T or P, powers of 1024, or KB, MB, " ..
                                "GB, TB, PB, powers of 1000: capacity=40G)", v))
                        end
                    elseif k == "bw" then
                        -- the syntax only: tierd reads the units (K, M, G, T: powers of
                        -- 1024), and its dry run refuses what it cannot read
                        if not v:match("^%d+%.?%d*%a*$") and not v:match("^%d+%.?%d*%a*/s$") then
                            return bad(string.format("bw=%s is not a rate (bytes/s, or " ..
                                "like bw=800M or bw=800MiB/s)", v))
                        end
                        spec.bw = v
                    elseif k == "class" then
                        if not CLASSES[v] then
                            return bad(string.format("class=%s is not one of %s", v,
                                CLASS_LIST))
                        end
                        spec.class = v
                        spec.class_line = n
                    elseif k == "tenant" then
                        if C.user_tenants ~= "yes" then
                            return bad("tenant= is not allowed on this cluster " ..
                                "(user_tenants = no in tierd_bb.conf): the job's tenant " ..
                                "is slurm-JOBID")
                        end
                        if #v > 63 or not v:match("^[%w._-]+$") then
                            return bad(string.format("tenant=%s: 1 to 63 letters, digits, " ..
                                "'.', '_', '-'", v))
                        end
                        spec.tenant = v
                    else
                        if v ~= C.pool then
                            return bad(string.format("pool=%s: this cluster's tierd pool " ..
                                "is %s", v, C.pool))
                        end
                        spec[k] = v
                    end
                end
            end
        end
    end
    if #spec.stage > 0 and not spec.capacity then
        n = 0
        return nil, "stage= needs capacity=SIZE: the hot-tier space the staged files take " ..
            "(for example #BB_LUA pool=tierd capacity=40G stage=/datasets/x)"
    end
    return spec
end

local function tenant_of(spec, job_id)
    return spec.tenant or ("slurm-" .. job_id) -- the name tierd resolves the job's processes to
end

-- The job's id in tierd.
local function tid(job_id)
    return C.job_prefix .. tostring(job_id)
end

-- The body of POST /v1/jobs for a job.
local function job_body(spec, job_id, cache_bytes)
    local b = {
        job = tid(job_id),
        tenant = tenant_of(spec, job_id),
        cache_bytes = bytes_str(cache_bytes or 0),
        class = spec.class or "training",
    }
    if #spec.stage > 0 then
        b.stage = spec.stage
    end
    if #spec.stage_out > 0 then
        b.stage_out = spec.stage_out
    end
    if spec.bw then
        b.bandwidth = spec.bw
    end
    if spec.cluster then
        b.cluster = true
    end
    if spec.uid then
        -- the job's owner: tierd then believes SLURM_JOB_ID in this uid's processes only
        b.uid = spec.uid
        b.slurm_job = tostring(job_id)
    end
    return b
end

-- ---- Slurm's view of its jobs ----------------------------------------------------------------

-- Slurm's final job states, as squeue's %T prints them with no flag set (STAGE_OUT,
-- COMPLETING, REQUEUED and the other flags are printed instead of these): such a job holds no
-- burst buffer any more.
local FINAL = { COMPLETED = true, CANCELLED = true, FAILED = true, TIMEOUT = true,
    NODE_FAIL = true, PREEMPTED = true, BOOT_FAIL = true, DEADLINE = true, OUT_OF_MEMORY = true }

-- A Slurm job id as the provider makes tierd ids of them (a uint32 without leading zeros), or nil.
local function slurm_id(s)
    return s:match("^[1-9]%d*$") and #s <= 10 and tonumber(s) < 2 ^ 32 and s or nil
end

-- slurm_states(IDS) -> {[id] = state}, every id of the list IDS in it: its state as squeue
-- prints it, or "gone" where slurmctld does not know it (purged after MinJobAge, or never a
-- job); or nil and a message when squeue does not answer (nothing is known then). One squeue
-- call, whose output holds only ids and states (job names, comments and paths are users' text).
local function slurm_states(ids)
    local cmd = string.format("SLURM_CONF=%s/slurm.conf %s -h -a -t all -j %s -o '%%A|%%T' " ..
        "2>&1; echo \"rc=$?\"", DIR, C.squeue, table.concat(ids, ","))
    local p = io.popen(cmd, "r")
    local out = p and p:read("*a") or ""
    if p then
        p:close()
    end
    local rc = tonumber(out:match("rc=(%d+)%s*$"))
    local got, n = {}, 0
    for id, st in out:gmatch("(%d+)|([%u_]+)\n") do
        got[id] = st
        n = n + 1
    end
    -- one unknown id alone is an error ("Invalid job id specified"); in a longer list it is
    -- left out of the output
    if rc ~= 0 and not (n == 0 and out:find("slurm_load_jobs error: Invalid job id specified", 1,
            true)) then
        return nil, "squeue: " .. (out:gsub("%s+", " "):sub(1, 300))
    end
    for _, id in ipairs(ids) do
        got[id] = got[id] or "gone"
    end
    return got
end

-- ---- the hooks' bodies -----------------------------------------------------------------------

local S, E = slurm.SUCCESS, slurm.ERROR

-- Register a named tenant with a rule for this Slurm job, so the job's reads are its.
local function register_tenant(t, spec, job_id)
    if not spec.tenant then
        return true -- slurm-JOBID: POST /v1/jobs registers it, and tierd resolves the job to it
    end
    local code, obj, text = request(t, "POST", "/v1/tenants", {
        name = spec.tenant, class = spec.class, slurm_job = tostring(job_id), uid = spec.uid })
    if code == 200 or code == 201 then
        return true
    elseif code == 507 then
        -- the registry (or its rules) is full: POST /v1/jobs counts the job as "other"
        slurm.log_info("%s: job %s: tenant %s not registered: %s", lua_script_name, job_id,
            spec.tenant, why(obj, text))
        return true
    end
    return nil, string.format("tierd: tenant %s: %s", spec.tenant, why(obj, text))
end

-- submit(target, spec, job_id, bytes) -> job table, or nil and a message. Queued is a success.
local function submit(t, spec, job_id, bytes)
    local ok, msg = register_tenant(t, spec, job_id)
    if not ok then
        return nil, msg
    end
    local code, obj, text = request(t, "POST", "/v1/jobs", job_body(spec, job_id, bytes))
    if code == 200 or (code == 409 and obj and obj.state == "queued") then
        return obj
    end
    return nil, string.format("tierd (%s): job %s: HTTP %d: %s", t.what, job_id, code,
        why(obj, text))
end

-- wait_staged(target, spec, job_id, bytes) -> true, or nil and a message. Polls GET
-- /v1/jobs/ID until admitted and staged; resubmits once if tierd forgot the job (restart).
local function wait_staged(t, spec, job_id, bytes)
    local resubmitted = false
    while true do
        local code, obj, text = request(t, "GET", "/v1/jobs/" .. tid(job_id))
        if transient(code, obj) then
            -- tierd restarting, unreachable or busy: Slurm's StageInTimeout bounds this
            slurm.log_info("%s: job %s: HTTP %d %s; retrying", lua_script_name, job_id, code,
                why(obj, text))
            sleep_s(1)
        elseif code == 404 and not resubmitted then
            resubmitted = true
            -- tierd forgot the job (a restart), or a release came first: a job Slurm has ended
            -- (a cancel during stage-in) is not admitted again
            local st = slurm_states({ tostring(job_id) })
            local s1 = st and st[tostring(job_id)]
            if s1 == "gone" or FINAL[s1] then
                return nil, string.format("tierd: job %s is not admitted: Slurm's job is %s",
                    job_id, s1 == "gone" and "gone" or s1)
            end
            local j, msg = submit(t, spec, job_id, bytes)
            if not j then
                return nil, msg
            end
        elseif code ~= 200 or not obj then
            return nil, string.format("tierd (%s): job %s: HTTP %d: %s", t.what, job_id, code,
                why(obj, text))
        elseif obj.state == "admitted" and obj.staging and
            (obj.staging.state == "staged" or obj.staging.state == "none") then
            return true
        elseif obj.staging and obj.staging.state == "failed" then
            return nil, string.format("tierd: staging of job %s failed: %s", job_id,
                tostring(obj.staging.error))
        end
        sleep_s(tonumber(C.poll_interval) or 0.25)
    end
end

-- The job's reserved size as Slurm holds it: setup's argument, else the directive.
local function job_bytes(spec, bb_size)
    local n = tonumber(bb_size)
    if n and n > 0 then
        return n
    end
    return spec.capacity or 0
end

local function job_id_of_script(path)
    return path:match("/job%.(%d+)/") or "0"
end

-- slurmctld's conf for scontrol (this script sits next to slurm.conf).
local function scontrol(args)
    local cmd = string.format("SLURM_CONF=%s/slurm.conf %s %s 2>/dev/null", DIR, C.scontrol, args)
    local p = io.popen(cmd, "r")
    local out = p and p:read("*a") or ""
    if p then
        p:close()
    end
    return out
end

-- The targets of a job's nodes (node_url with each node's NodeAddr), or an empty table.
local function node_targets(job_id)
    local ts = {}
    if C.node_url == "" then
        return ts
    end
    local list = scontrol("-o show job " .. job_id):match("%sNodeList=(%S+)")
    if not list or list == "(null)" then
        return ts
    end
    local tok
    if C.token_file ~= "" then
        tok = read_file(C.token_file)
        tok = tok and tok:match("^%s*(.-)%s*$")
    end
    for host in scontrol("show hostnames " .. list):gmatch("%S+") do
        if host:match("^[%w._-]+$") then
            local addr = scontrol("-o show node " .. host):match("%sNodeAddr=(%S+)") or host
            local url = C.node_url:gsub("%%s", (addr:gsub("%%", "%%%%")))
            ts[#ts + 1] = { base = url:gsub("/+$", ""), token = tok, what = host .. " " .. url }
        end
    end
    return ts
end

-- Wall-clock seconds (lua-posix: to the microsecond; else to the second).
local function wall_s()
    if posix_time then
        local t = posix_time.clock_gettime(posix_time.CLOCK_REALTIME)
        return t.tv_sec + t.tv_nsec / 1e9
    end
    return os.time()
end

local function timing(name, job_id, ms, rc)
    if C and C.timing_log ~= "" then
        local f = io.open(C.timing_log, "a")
        if f then
            f:write(string.format("%s %s %.3f %d %.6f\n", name, tostring(job_id), ms, rc, wall_s()))
            f:close()
        end
    end
end

-- run(NAME, JOBID, FN, ...): FN's (rc, msg), timed, logged, Lua errors caught.
local function run(name, job_id, fn, ...)
    local t0 = now_ms()
    local ok, rc, msg = pcall(function(...)
        load_conf()
        return fn(...)
    end, ...)
    if not ok then
        msg = "tierd provider: " .. tostring(rc)
        rc = E
    end
    rc = rc or E
    timing(name, job_id, now_ms() - t0, rc)
    if rc ~= S then
        slurm.log_error("%s: %s job %s: %s", lua_script_name, name, tostring(job_id), tostring(msg))
    else
        slurm.log_debug("%s: %s job %s: %s", lua_script_name, name, tostring(job_id),
            tostring(msg or "ok"))
    end
    if msg == nil then
        return rc -- Slurm takes no nil as a second value
    end
    return rc, tostring(msg)
end

-- run_job(NAME, JOBID, SCRIPT, FN): run() for a hook of a job: FN(spec) gets the job's parsed
-- directives (a script that does not parse fails the hook with the parser's message).
local function run_job(name, job_id, job_script, fn)
    return run(name, job_id, function()
        local spec, msg = parse(job_script)
        if not spec then
            return E, msg
        end
        return fn(spec)
    end)
end

-- The job's nodes' tierd with node_url, else this host's; or nil and a message.
local function job_targets(job_id)
    local ts = node_targets(job_id)
    if #ts > 0 then
        return ts, true
    end
    local t, terr = local_target()
    if not t then
        return nil, terr
    end
    return { t }, false
end

-- ---- reconciliation: jobs whose teardown never reached tierd --------------------------------

-- reconcile(target, JOBID, SEEN): release on target every job of this cluster (tierd id
-- job_prefix + a Slurm job id) other than JOBID whose Slurm job has ended or that slurmctld no
-- longer knows. Its teardown never reached tierd (Slurm 22.05 does not run again a teardown it
-- killed itself, and gives up on one that failed three times: docs/SLURM.md), and its
-- reservation and pins would otherwise stay for ever. A job pending, running, in stage-out or in
-- any state with a flag is kept, and so is every job when squeue does not answer. SEEN (a
-- table, or nil) keeps squeue's answers across the targets of one hook. Best effort: a failure
-- is logged and never fails the hook. Returns the number released.
local function reconcile(t, job_id, seen)
    if C.reconcile == "no" then
        return 0
    end
    local code, obj, text = request(t, "GET", "/v1/jobs")
    if code ~= 200 or not obj or type(obj.jobs) ~= "table" then
        slurm.log_info("%s: job %s: tierd's jobs on %s not reconciled: HTTP %d: %s",
            lua_script_name, job_id, t.what, code, why(obj, text))
        return 0
    end
    -- tierd's jobs are listed before Slurm is asked: a job of this cluster in tierd's list was
    -- set up by a job slurmctld knew before, so squeue's answer covers it
    local pfx, cand, ask = C.job_prefix, {}, {}
    seen = seen or {}
    for _, j in ipairs(obj.jobs) do
        local id = tostring(j.job)
        local sid = id:sub(1, #pfx) == pfx and slurm_id(id:sub(#pfx + 1))
        if sid and sid ~= tostring(job_id) then
            cand[#cand + 1] = { id = id, sid = sid, bytes = tonumber(j.cache_bytes) or 0 }
            if not seen[sid] then
                ask[#ask + 1] = sid
            end
        end
    end
    if #ask > 0 then
        local st, err = slurm_states(ask)
        if not st then
            slurm.log_info("%s: job %s: tierd's jobs on %s not reconciled: %s", lua_script_name,
                job_id, t.what, err)
            return 0
        end
        for k, v in pairs(st) do
            seen[k] = v
        end
    end
    local n = 0
    for _, c in ipairs(cand) do
        local st = seen[c.sid]
        if st == "gone" or FINAL[st] then
            local c2, o2, t2 = request(t, "DELETE", "/v1/jobs/" .. c.id)
            if c2 == 200 then
                n = n + 1
                slurm.log_info("%s: job %s: released tierd job %s on %s (%s bytes reserved): " ..
                    "Slurm job %s is %s, and no teardown released it", lua_script_name, job_id,
                    c.id, t.what, bytes_str(c.bytes), c.sid,
                    st == "gone" and "no longer known to slurmctld" or st)
            elseif c2 ~= 404 then
                slurm.log_error("%s: job %s: release of stale tierd job %s on %s: HTTP %d: %s",
                    lua_script_name, job_id, c.id, t.what, c2, why(o2, t2))
            end
        end
    end
    return n
end

-- ---- the hooks -------------------------------------------------------------------------------

function slurm_bb_job_process(job_script)
    local job_id = job_id_of_script(job_script)
    return run("slurm_bb_job_process", job_id, function()
        local spec, msg = parse(job_script)
        if not spec then
            return E, msg
        end
        -- user_classes bounds what a job may ask for at submission only: the later hooks take
        -- any class, so that a job accepted before the list was narrowed (or before this check
        -- existed) still stages out and is released
        if USER_CLASSES_ERR then
            return E, "tierd provider: " .. USER_CLASSES_ERR
        end
        if spec.class and not USER_CLASSES[spec.class] then
            return E, string.format("#BB_LUA line %d: class=%s is not allowed on this cluster " ..
                "(user_classes = %s in tierd_bb.conf): ask without class= (training) or for " ..
                "one of the classes listed there", spec.class_line, spec.class, C.user_classes)
        end
        if C.check_at_submit == "no" then
            return S
        end
        local t, terr = local_target()
        if not t then
            return E, "tierd: " .. terr
        end
        if not cjson_ok then
            return E, "tierd provider: lua-cjson is not installed on the controller " ..
                "(apt install lua-cjson)"
        end
        local body = job_body(spec, job_id, spec.capacity)
        body.dry_run = true
        local code, obj, text = request(t, "POST", "/v1/jobs", body, C.sync_timeout)
        if code == 200 and obj and obj.verdict == "conflict" then
            return E, "tierd: " .. tostring(obj.reason)
        elseif code == 200 then
            return S
        elseif code == 0 then
            -- tierd did not answer in time: the syntax is right, setup will say the rest (the
            -- job is then held with tierd's message), rather than refusing while tierd restarts
            slurm.log_info("%s: job %s: not checked by tierd at submit: %s", lua_script_name,
                job_id, text)
            return S
        end
        return E, "tierd: " .. why(obj, text)
    end)
end

function slurm_bb_pools()
    return run("slurm_bb_pools", "-", function()
        local t, terr = local_target()
        if not t then
            return E, terr
        end
        local code, obj, text = request(t, "GET", "/v1/jobs", nil, C.sync_timeout)
        if code ~= 200 or not obj or type(obj.capacity) ~= "table" then
            return E, "tierd: " .. why(obj, text)
        end
        local q = tonumber(obj.capacity.capacity_bytes) or 0
        return S, string.format('{"pools":[{"id":%s,"quantity":%.0f,"granularity":1}]}',
            cjson.encode(C.pool), q)
    end)
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
    return run_job("slurm_bb_setup", job_id, job_script, function(spec)
        local t, terr = local_target()
        if not t then
            return E, terr
        end
        reconcile(t, job_id) -- a lost teardown's reservation must not queue this job
        spec.uid = tonumber(uid) -- the job's user, as Slurm gives it (sent with the requests)
        local j, err = submit(t, spec, job_id, job_bytes(spec, bb_size))
        if not j then
            return E, err
        end
        return S, j.state
    end)
end

function slurm_bb_data_in(job_id, job_script)
    return run_job("slurm_bb_data_in", job_id, job_script, function(spec)
        local t, terr = local_target()
        if not t then
            return E, terr
        end
        local ok, err = wait_staged(t, spec, job_id, spec.capacity)
        if not ok then
            return E, err
        end
        return S
    end)
end

function slurm_bb_real_size(job_id)
    return run("slurm_bb_real_size", job_id, function()
        return S
    end)
end

function slurm_bb_paths(job_id, job_script, path_file)
    return run_job("slurm_bb_paths", job_id, job_script, function(spec)
        local function under(list)
            local out = {}
            for i, p in ipairs(list) do
                out[i] = C.mount:gsub("/+$", "") .. p
            end
            return table.concat(out, ",")
        end
        local f = assert(io.open(path_file, "w"))
        f:write("TIERD_TENANT=", tenant_of(spec, job_id), "\n")
        f:write("TIERD_MOUNT=", C.mount, "\n")
        f:write("TIERD_STAGE=", under(spec.stage), "\n")
        f:write("TIERD_STAGE_OUT=", under(spec.stage_out), "\n")
        f:close()
        return S
    end)
end

-- The uid a job runs as, from slurmctld (`scontrol -o show job` prints UserId=name(uid)); nil
-- when it does not say.
local function job_uid(job_id)
    local u = scontrol("-o show job " .. job_id):match("%sUserId=[^%s(]*%((%d+)%)")
    return u and tonumber(u)
end

-- Slurm 23.02 and later give pre_run the job's uid and gid; 22.05 gives only the job id and
-- script, and then the uid is asked of slurmctld.
function slurm_bb_pre_run(job_id, job_script, uid, gid, job_info)
    return run_job("slurm_bb_pre_run", job_id, job_script, function(spec)
        local targets, on_nodes = job_targets(job_id)
        if not targets then
            return E, on_nodes
        end
        if on_nodes then
            -- each node's tierd learns the job's owner here (setup only told this host's)
            spec.uid = tonumber(uid) or job_uid(job_id)
            if not spec.uid then
                slurm.log_error("%s: slurm_bb_pre_run: job %s: scontrol shows no UserId: the " ..
                    "nodes' tierd are told no uid, so SLURM_JOB_ID is not believed there",
                    lua_script_name, tostring(job_id))
            end
        end
        -- A job on several nodes is staged cluster-wide on each: a node fetches the blocks it
        -- owns and warms the others on their owners, whose single-flight makes the nodes' warms
        -- of one block a single fetch; pins and reservations stay per node (docs/SLURM.md)
        local distinct, nd = {}, 0
        for _, t in ipairs(on_nodes and targets or {}) do
            if not distinct[t.base] then
                distinct[t.base] = true
                nd = nd + 1
            end
        end
        if nd > 1 and #spec.stage > 0 and C.cluster_stage == "auto" then
            spec.cluster = true
        end
        -- Node-local admission and warming: submit on every node first, then wait for each
        -- (without node_url: this host's tierd admitted the job in setup; check it is staged).
        local seen = {}
        for _, t in ipairs(on_nodes and targets or {}) do
            reconcile(t, job_id, seen)
            local j, err = submit(t, spec, job_id, spec.capacity)
            if not j then
                return E, err
            end
        end
        for _, t in ipairs(targets) do
            local ok, err = wait_staged(t, spec, job_id, spec.capacity)
            if not ok then
                return E, err
            end
        end
        return S
    end)
end

function slurm_bb_post_run(job_id)
    return run("slurm_bb_post_run", job_id, function()
        return S
    end)
end

-- Wait until everything under path is durable on target; true, or nil and a message.
local function wait_durable(t, job_id, path)
    while true do
        local step = math.max(1, tonumber(C.wait_step) or 20)
        local t0 = now_ms()
        local code, obj, text = request(t, "POST", "/v1/wait", { path = path, timeout_s = step },
            step + 10)
        if code ~= 504 and transient(code, obj) then
            -- tierd restarting (its spool keeps the files), unreachable or busy: Slurm's
            -- StageOutTimeout bounds this
            slurm.log_info("%s: job %s: HTTP %d %s; retrying", lua_script_name, job_id, code,
                why(obj, text))
            sleep_s(1)
        elseif code == 200 then
            return true
        elseif code == 404 and why(obj, text):find("no such file or directory", 1, true) then
            -- the job wrote nothing there (a 404 for a path outside write-back is an error)
            slurm.log_info("%s: job %s: nothing written under stage_out %s", lua_script_name,
                job_id, path)
            return true
        elseif code == 504 then
            slurm.log_info("%s: job %s: %s not durable yet; waiting", lua_script_name, job_id,
                path)
            if now_ms() - t0 < 500 then
                sleep_s(1) -- answered at once (tierd's max_wait): never a busy loop
            end
        else
            return nil, string.format("tierd (%s): stage_out %s of job %s: HTTP %d: %s", t.what,
                path, job_id, code, why(obj, text))
        end
    end
end

function slurm_bb_data_out(job_id, job_script)
    return run_job("slurm_bb_data_out", job_id, job_script, function(spec)
        local targets, terr = job_targets(job_id)
        if not targets then
            return E, terr
        end
        for _, t in ipairs(targets) do
            for _, p in ipairs(spec.stage_out) do
                local ok, err = wait_durable(t, job_id, p)
                if not ok then
                    return E, err
                end
            end
        end
        return S
    end)
end

function slurm_bb_job_teardown(job_id, job_script, hurry)
    return run("slurm_bb_job_teardown", job_id, function()
        local targets = node_targets(job_id)
        local t, terr = local_target()
        if not t then
            return E, terr
        end
        table.insert(targets, 1, t)
        local seen, errs = {}, {}
        for _, tt in ipairs(targets) do
            if not seen[tt.base] then
                seen[tt.base] = true
                local code, obj, text = request(tt, "DELETE", "/v1/jobs/" .. tid(job_id))
                if code ~= 200 and code ~= 404 then
                    errs[#errs + 1] = string.format("%s: HTTP %d: %s", tt.what, code,
                        why(obj, text))
                end
            end
        end
        if #errs > 0 then
            return E, "tierd: release of job " .. job_id .. ": " .. table.concat(errs, "; ")
        end
        return S
    end)
end

local function fmt_bytes(n)
    n = tonumber(n) or 0
    local units = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" }
    local i = 1
    while n >= 1024 and i < #units do
        n = n / 1024
        i = i + 1
    end
    return i == 1 and string.format("%d B", n) or string.format("%.1f %s", n, units[i])
end

-- Slurm 22.05 passes only the words after `bbstat` (later releases put uid and gid first).
function slurm_bb_get_status(...)
    local args = { ... }
    return run("slurm_bb_get_status", "-", function()
        local t, terr = local_target()
        if not t then
            return E, terr
        end
        local code, obj, text = request(t, "GET", "/v1/jobs")
        if code ~= 200 or not obj then
            return E, "tierd: " .. why(obj, text)
        end
        local want = args[1]
        local lines = {}
        local c = obj.capacity or {}
        lines[#lines + 1] = string.format("tierd pool %s: capacity %s, reserved %s, " ..
            "reservable %s; %d admitted, %d queued", C.pool, fmt_bytes(c.capacity_bytes),
            fmt_bytes(c.reserved_bytes), fmt_bytes(c.reservable_bytes), c.admitted or 0,
            c.queued or 0)
        lines[#lines + 1] = string.format("%-12s %-9s %-20s %-11s %-10s %-9s %s", "JOB", "STATE",
            "TENANT", "CLASS", "RESERVED", "STAGING", "STAGED")
        for _, j in ipairs(obj.jobs or {}) do
            if not want or tostring(j.job) == tid(want) then
                local st = j.staging or {}
                lines[#lines + 1] = string.format("%-12s %-9s %-20s %-11s %-10s %-9s %s / %s",
                    tostring(j.job), tostring(j.state), tostring(j.tenant), tostring(j.class),
                    fmt_bytes(j.cache_bytes), tostring(st.state), fmt_bytes(st.bytes_done),
                    fmt_bytes(st.bytes_total))
            end
        end
        return S, table.concat(lines, "\n") .. "\n"
    end)
end
