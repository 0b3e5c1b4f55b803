/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_config.c - tierd.conf parsing (src/daemon/config.c): a table of bad configs, each with
 * the message it must produce (file:line, key, allowed values, did-you-mean), and good configs
 * parsed into the expected struct, defaults included; and the namespace tree built from it
 * (tierd_resolve, virtual directories: src/daemon/resolve.c); the registry from [tenants] and the
 * GPU sampler's lookup in it (tierd_tenant_of_pid, src/daemon/tenants.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hints/hints.h"
#include "cluster/member_entry.h"
#include "daemon/tierd.h"
#include "tenant/tenant.h"
#include "testutil.h"

/* The smallest valid config; bad cases append to or replace parts of it. */
#define BASE                                                                                       \
    "[backend warm]\n"                                                                             \
    "type = posix\n"                                                                               \
    "root = /srv\n"                                                                                \
    "[namespace /d]\n"                                                                             \
    "backend = warm\n"                                                                             \
    "[mount]\n"                                                                                    \
    "path = /mnt/t\n"

struct bad_case {
    const char *text;
    const char *expect[4]; /* substrings that must all appear */
};

static const struct bad_case bad_cases[] = {
    /* typo of a known key, with the line */
    {BASE "[cache]\nblok_size = 4M\n",
     {"t.conf:9:", "unknown key 'blok_size'", "did you mean 'block_size'?"}},
    {BASE "[mount2]\n", {"t.conf:8:", "unknown section [mount2]", "did you mean [mount]?"}},
    {BASE "[frobnicate]\n", {"t.conf:8:", "unknown section [frobnicate]", "allowed: [daemon]"}},
    {BASE "[backnd x]\ntype = posix\n", {"t.conf:8:", "did you mean [backend NAME]?"}},
    /* upload buffers bounded (64 x 64 x 5 GiB of buffers must be refused) */
    {BASE "[writeback]\nspool_dir = /tmp/s\nupload_threads = 64\nparts_parallel = 64\n"
          "part_size = 1G\n",
     {"t.conf:8:", "upload_threads x parts_parallel x part_size = 64 x 64 x 1024 MiB",
      "lower one of them"}},
    /* allowed values */
    {BASE "[cache]\npolicy = fifo\n", {"t.conf:9:", "policy = 'fifo'", "allowed: s3fifo, lru"}},
    {BASE "no_open = maybe\n", {"t.conf:8:", "no_open = 'maybe'", "allowed: auto, on, off"}},
    {BASE "[cache]\nblock_size = 1K\n", {"t.conf:9:", "block_size = '1K'", "64.0 KiB", "64.0 MiB"}},
    {BASE "[cache]\nram_size = lots\n", {"t.conf:9:", "ram_size = 'lots'", "not a size"}},
    {BASE "[daemon]\nlog_level = loud\n", {"t.conf:9:", "allowed: error, warn, info, debug"}},
    {BASE "[daemon]\nbackend_timeout = soon\n", {"t.conf:9:", "backend_timeout", "duration"}},
    {BASE "[daemon]\nstage_threads = 0\n", {"t.conf:9:", "stage_threads = '0'", "from 1 to 256"}},
    {BASE "[daemon]\ntelemetry = maybe\n",
     {"t.conf:9:", "[daemon] telemetry = 'maybe'", "allowed: true, false, yes, no, on, off"}},
    {BASE "[daemon]\ngpu_sampling = on\n",
     {"t.conf:9:", "gpu_sampling = 'on'", "allowed: auto, off"}},
    {BASE "[daemon]\ngpu_sample_interval = 500ms\n", {"t.conf:9:", "gpu_sample_interval"}},
    {BASE "[daemon]\ngpu_sample_interval = 2h\n", {"t.conf:9:", "gpu_sample_interval"}},
    {BASE "[daemon]\nqos = dmclock\n",
     {"t.conf:9:", "[daemon] qos = 'dmclock'", "allowed: true, false, yes, no, on, off"}},
    {BASE "[mount]\n", {"t.conf:8:", "duplicate section [mount]", "first at line 6"}},
    {"[mount]\npath = /m\nallow_other = maybe\n[backend w]\ntype=posix\nroot=/s\n[namespace "
     "/x]\nbackend=w\n",
     {"t.conf:3:", "allow_other = 'maybe'", "true, false"}},
    /* owner and mode of the mount (docs/CONFIG.md, Permissions) */
    {BASE "umask = 0999\n", {"t.conf:8:", "umask = '0999'", "octal mask from 000 to 777"}},
    {BASE "umask = 1000\n", {"t.conf:8:", "umask = '1000'"}},
    {BASE "umask = -22\n", {"t.conf:8:", "umask = '-22'"}},
    {BASE "uid = no-such-user-xyz\n", {"t.conf:8:", "not a known user", "/etc/passwd"}},
    {BASE "gid = 4294967295\n", {"t.conf:8:", "not a known group", "4294967294"}},
    {BASE "[namespace /e]\nbackend = warm\ngid = no-such-group-xyz\n",
     {"t.conf:10:", "[namespace /e] gid", "not a known group"}},
    {BASE "max_dir_entries = 0\n", {"t.conf:8:", "max_dir_entries = '0'", "from 1 to"}},
    /* backends */
    {BASE "[backend cold]\ntype = ftp\n", {"t.conf:9:", "type = 'ftp'", "allowed: posix, s3"}},
    {BASE "[backend cold]\nbucket = b\n", {"t.conf:8:", "missing required key 'type'"}},
    {BASE "[backend cold]\ntype = s3\nendpoint = http://x\n",
     {"t.conf:8:", "[backend cold]", "missing required key 'bucket'"}},
    {BASE "[backend cold]\ntype = s3\nbucket = b\nendpoint = http://x\nroot = /x\n",
     {"t.conf:12:", "key 'root' is for backends of type posix", "valid: type, endpoint"}},
    {BASE "[backend cold]\ntype = s3\nbucket = b\nendpoint = http://x\nregoin = x\n",
     {"t.conf:12:", "did you mean 'region'?"}},
    {BASE "[backend warm]\ntype = posix\nroot = /x\n",
     {"t.conf:8:", "duplicate backend 'warm'", "line 1"}},
    {BASE "[backend]\n", {"t.conf:8:", "needs a name"}},
    /* a backend's scheduler lane (any type) */
    {BASE "[backend cold]\ntype = s3\nbucket = b\nendpoint = http://x\nmax_inflight = 0\n",
     {"t.conf:12:", "max_inflight = '0'", "from 1 to 4096"}},
    {BASE "[backend w2]\ntype = posix\nroot = /x\nbreaker_cooldown = soon\n",
     {"t.conf:11:", "breaker_cooldown", "duration"}},
    {BASE "[backend w2]\ntype = posix\nroot = /x\nbreaker_failures = -1\n",
     {"t.conf:11:", "breaker_failures", "from 0 to 1000"}},
    {BASE "[backend w2]\ntype = posix\nroot = /x\nsplit_reads = 1K\n",
     {"t.conf:11:", "split_reads = '1K'", "auto, off, or a size from 16.0 KiB to 64.0 MiB"}},
    {BASE "[backend w2]\ntype = posix\nroot = /x\nsplit_reads = sometimes\n",
     {"t.conf:11:", "split_reads = 'sometimes'", "auto, off"}},
    {"[backend warm]\ntype = posix\n[namespace /d]\nbackend = warm\n[mount]\npath = /m\n",
     {"t.conf:1:", "[backend warm] is missing required key 'root'"}},
    /* a typo of a required key wins over "missing": it is the cause */
    {"[backend warm]\ntype = posix\nrot = /x\n[namespace /d]\nbackend = warm\n[mount]\npath = /m\n",
     {"t.conf:3:", "unknown key 'rot'", "did you mean 'root'?"}},
    /* namespaces */
    {BASE "[namespace /e]\nbackend = wram\n",
     {"t.conf:9:", "backend = 'wram' is not defined", "did you mean 'warm'?"}},
    {BASE "[namespace /e]\nbackend = zzzzzz\n",
     {"t.conf:9:", "not defined", "defined backends: warm"}},
    {BASE "[namespace /e]\nbackend = warm\nmode = rw\n",
     {"t.conf:10:", "allowed: read-cache, write-back"}},
    /* write-back */
    {BASE "[namespace /e]\nbackend = warm\nmode = write-back\n",
     {"t.conf:8:", "needs a spool directory", "spool_dir"}},
    {BASE "[writeback]\nspool_dir = /s\n[namespace /e]\nbackend = warm\nmode = write-back\n"
          "durability = cloud\n",
     {"t.conf:13:", "durability = 'cloud'", "allowed: local, remote"}},
    {BASE "[namespace /e]\nbackend = warm\ndurability = remote\n",
     {"t.conf:10:", "durability only applies to mode = write-back"}},
    {BASE "[writeback]\nspool_dir = /s\npart_size = 1M\n",
     {"t.conf:10:", "part_size = '1M'", "5.0 MiB"}},
    {BASE "[writeback]\nupload_threads = 0\n", {"t.conf:9:", "upload_threads", "from 1 to 64"}},
    {BASE "[writeback]\nmax_dirty_age = forever\n", {"t.conf:9:", "max_dirty_age", "duration"}},
    {BASE "[writeback]\nspool = /s\n", {"t.conf:9:", "unknown key 'spool'", "spool_dir"}},
    {BASE "[writeback]\nretention_keep = -1\n", {"t.conf:9:", "retention_keep"}},
    {BASE "[writeback]\n[writeback]\n", {"t.conf:9:", "duplicate section [writeback]"}},
    /* [policy NAME] (docs/POLICIES.md): every error at its line */
    {BASE "[policy p]\nnamespace = /d\naction = demote\nidle = a while\n",
     {"t.conf:11:", "idle = 'a while'", "not a duration"}},
    {BASE "[policy p]\nnamespace = /d\naction = demote\ntenant = bad name\n",
     {"t.conf:11:", "tenant = 'bad name' is not a tenant name"}},
    {BASE "[policy p]\nnamespace = /d\naction = expire\nallow_delete = true\ntenant = alice\n",
     {"t.conf:12:", "tenant cannot choose what expire deletes", "prefix"}},
    {BASE "[policy p]\nnamespace = /d\naction = demote\nlevel = nvme\n",
     {"t.conf:11:", "level = 'nvme'", "allowed: ram, disk, all"}},
    {BASE "[policy p]\nnamespace = /d\nlevel = ram\naction = stage\n",
     {"t.conf:10:", "level only applies to action = demote"}},
    {BASE "[policy p]\nnamespace = /d\nlevel = ram\naction = demote\n",
     {"t.conf:10:", "level = ram moves blocks into the disk level", "disk_dir"}},
    /* two rules for different tenants do not contradict; for the same tenant they do */
    {BASE "[policy a]\nnamespace = /d\ntenant = alice\naction = stage\n"
          "[policy b]\nnamespace = /d\ntenant = alice\naction = demote\n",
     {"t.conf:12:", "contradicts [policy a]"}},
    {BASE "[policy p]\nnamespace = /d\naction = demote\nwhen = 1h\n",
     {"t.conf:11:", "unknown key 'when'", "keep_last"}},
    /* the did-you-mean is config.c's (edit distance): the prefix match it replaced missed a
     * transposition past the second letter ('tagret') */
    {BASE "[policy p]\nnamespace = /d\naction = copy\ntagret = warm:x/\n",
     {"t.conf:11:", "unknown key 'tagret'", "did you mean 'target'?", "allow_delete)"}},
    {BASE "[policy p]\nnamespace = /d\naction = demote\nlevle = ram\n",
     {"t.conf:11:", "unknown key 'levle'", "did you mean 'level'?"}},
    /* every [policy] key is named by the hint for a key in another section (the table was one
     * of its own, without level, idle, dataset and tenant) */
    {BASE "[cache]\nlevel = ram\n",
     {"t.conf:9:", "unknown key 'level' in [cache]", "it belongs in [policy NAME]"}},
    {BASE "[policy p]\nnamespace = /d\nmatch = step_([0-9]+\naction = demote\n",
     {"t.conf:10:", "match = 'step_([0-9]+'", "not a POSIX extended regular expression"}},
    {BASE "[policy p]\nnamespace = /d\naction = expire\n",
     {"t.conf:10:", "action = expire", "allow_delete = true"}},
    {BASE "[policy p]\nnamespace = /d\naction = demote\nallow_delete = true\n",
     {"t.conf:11:", "allow_delete only applies to action = expire"}},
    {BASE "[policy p]\nnamespace = /d\naction = shred\n",
     {"t.conf:10:", "action = 'shred'", "allowed: demote, stage, pin, unpin, copy, expire"}},
    {BASE "[policy p]\nnamespace = /nope\naction = demote\n", {"t.conf:9:", "namespace = '/nope'"}},
    {BASE "[policy p]\naction = demote\n", {"t.conf:8:", "missing required key 'namespace'"}},
    {BASE "[policy p]\nnamespace = /d\n", {"t.conf:8:", "missing required key 'action'"}},
    {BASE "[policy p]\nnamespace = /d\naction = copy\n",
     {"t.conf:10:", "action = copy needs target"}},
    {BASE "[policy p]\nnamespace = /d\naction = copy\ntarget = cold:x/\n",
     {"t.conf:11:", "'cold' is not a [backend NAME]"}},
    {BASE "[policy p]\nnamespace = /d\naction = copy\ntarget = warm\n",
     {"t.conf:11:", "inside the namespace it copies from"}},
    {BASE "[policy p]\nnamespace = /d\nmatch = step_[0-9]+\nkeep_last = 3\naction = demote\n",
     {"t.conf:11:", "needs a capture group"}},
    {BASE "[policy p]\nnamespace = /d\nwatermark = 120%\naction = demote\n",
     {"t.conf:10:", "watermark = '120%'"}},
    {BASE "[policy p]\nnamespace = /d\nage = soon\naction = demote\n",
     {"t.conf:10:", "age = 'soon'"}},
    {BASE "[policy pin-all]\nnamespace = /d\naction = pin\n[policy cold]\nnamespace = /d\n"
          "prefix = old/\nage = 7d\naction = demote\n",
     {"t.conf:11:", "[policy cold] (action = demote) contradicts [policy pin-all] at line 8",
      "/d/old/"}},
    {BASE "[policy p]\nnamespace = /d\naction = pin\n[policy p]\n",
     {"t.conf:11:", "duplicate section [policy p]"}},
    {BASE "[policy]\n", {"t.conf:8:", "a policy needs a name"}},
    {BASE "[policy p]\nnamespace = /d\naction = demote\naction = pin\n",
     {"t.conf:11:", "duplicate key 'action'"}},
    {BASE "[daemon]\npolicy_interval = 10ms\n", {"t.conf:9:", "policy_interval"}},
    {BASE "[policy p]\nnamespace = /d\ndataset = /d/x\naction = pin\n",
     {"t.conf:10:", "dataset = '/d/x' is not a version"}},
    {BASE "[policy p]\nnamespace = /d\ndataset = /elsewhere/x@v1\naction = pin\n",
     {"t.conf:10:", "is not a tree of the namespace /d"}},
    {BASE "[backend arch]\ntype = posix\nroot = /a\n[writeback]\nspool_dir = /s\n"
          "[namespace /w]\nbackend = arch\nmode = write-back\n"
          "[policy p]\nnamespace = /d\naction = copy\ntarget = arch:w/\n",
     {"t.conf:19:", "overlaps the write-back namespace /w (line 13)"}},
    {BASE "[writeback]\ndurability = maybe\n", {"t.conf:9:", "allowed: local, remote"}},
    {BASE "[namespace /e]\n", {"t.conf:8:", "[namespace /e] is missing required key 'backend'"}},
    {BASE "[namespace data]\nbackend = warm\n", {"t.conf:8:", "must start with '/'"}},
    {BASE "[namespace /e/]\nbackend = warm\n", {"t.conf:8:", "must not end with '/'"}},
    {BASE "[namespace /d/sub]\nbackend = warm\n", {"t.conf:8:", "overlaps namespace /d"}},
    {BASE "[namespace /e/../f]\nbackend = warm\n", {"t.conf:8:", "'..'"}},
    /* /.tierd is the mount's control directory (src/fuse/fuse_ctl_hints.c) */
    {BASE "[namespace /.tierd]\nbackend = warm\n", {"t.conf:8:", "/.tierd", "control files"}},
    {BASE "[namespace /.tierd/x]\nbackend = warm\n", {"t.conf:8:", "cannot be /.tierd"}},
    {BASE "[namespace /e]\nbackend = warm\nprefix = a//b\n",
     {"t.conf:8:", "prefix", "not a valid key prefix"}},
    /* api */
    {BASE "[api]\ntcp = 127.0.0.1:7700\n", {"t.conf:9:", "tcp is set but no token"}},
    {BASE "[api]\ntcp = 127.0.0.1:7700\ntoken = short\n", {"t.conf:10:", "token is too weak"}},
    {BASE "[api]\ntcp = 127.0.0.1:7700\ntoken = change-me\n", {"t.conf:10:", "too weak"}},
    {BASE "[api]\ntcp = 0.0.0.0:7700\ntoken = 0123456789abcdef0\n",
     {"t.conf:9:", "'0.0.0.0:7700' is not a loopback address", "tls_cert"}},
    {BASE "[api]\ntcp = [::]:7700\ntoken = 0123456789abcdef0\n", {"t.conf:9:", "not a loopback"}},
    {BASE "[api]\ntcp = [::1]:7700\ntoken = 0123456789abcdef0\ntls_cert = /c.pem\n",
     {"t.conf:11:", "needs both tls_cert", "tls_key"}},
    {BASE "[api]\ntls_cert = /c.pem\ntls_key = /k.pem\n", {"t.conf:9:", "only apply to the TCP"}},
    {BASE "[api]\ntoken = 0123456789abcdef0\ntoken_file = /nonexistent/tok\n",
     {"t.conf:10:", "both token and token_file"}},
    {BASE "[api]\ntoken_file = /nonexistent/tok\n", {"t.conf:9:", "cannot be read"}},
    {BASE "[api]\nsocket_group = no-such-group-x\n", {"t.conf:9:", "not a group of this system"}},
    {BASE "[api]\nadmin_group = no-such-group-y\n", {"t.conf:9:", "admin_group"}},
    {BASE "[api]\nmax_wait = 0\n", {"t.conf:9:", "max_wait"}},
    {BASE "[api]\ntcp = localhost\ntoken = x\n", {"t.conf:9:", "HOST:PORT"}},
    {BASE "[api]\ncache_size = 1\n", {"t.conf:9:", "unknown key 'cache_size' in [api]"}},
    {BASE "[api]\nblock_size = 1M\n", {"t.conf:9:", "it belongs in [cache]"}},
    /* structure */
    {"ram_size = 1G\n" BASE, {"t.conf:1:", "outside any section"}},
    {BASE "[cache]\nthis line has no equals sign\n", {"t.conf:9:", "syntax error"}},
    {BASE "[cache]\nram_size = 1G\nram_size = 2G\n", {"t.conf:10:", "duplicate key 'ram_size'"}},
    {BASE "[cache]\nram_size = 0\n", {"ram_size = 0", "disk_dir"}},
    {"[backend warm]\ntype = posix\nroot = /srv\n[namespace /d]\nbackend = warm\n",
     {"t.conf:", "no [mount] section"}},
    {"[backend warm]\ntype = posix\nroot = /srv\n[mount]\npath = /m\n",
     {"no [namespace /PATH] section"}},
    {"[mount]\npath = relative/dir\n[backend w]\ntype=posix\nroot=/s\n[namespace /x]\nbackend=w\n",
     {"must be an absolute path"}},
    {"", {"no [mount] section"}},
    /* tenants */
    {BASE "[tenant a]\nclass = fast\n",
     {"t.conf:9:", "[tenant a] class = 'fast'", "allowed: inference, training, checkpoint"}},
    {BASE "[tenant a]\nclas = inference\n",
     {"t.conf:9:", "unknown key 'clas' in [tenant a]", "did you mean 'class'?"}},
    {BASE "[tenant a]\nfrob = 1\n",
     {"t.conf:9:", "unknown key 'frob'", "valid: class, slurm_job, cgroup, uid, gid"}},
    {BASE "[tenant a]\nmax_tenants = 5\n", {"t.conf:9:", "it belongs in [tenants]"}},
    {BASE "[tenant a]\nuid = no-such-user-xyz\n",
     {"t.conf:9:", "[tenant a] uid = 'no-such-user-xyz'", "not a known user", "/etc/passwd"}},
    {BASE "[tenant a]\ngid = 4294967295\n", {"t.conf:9:", "not a known group", "4294967294"}},
    {BASE "[tenant a]\nuid = -1\n", {"t.conf:9:", "not a known user"}},
    {BASE "[tenant a]\nslurm_job = 12x\n",
     {"t.conf:9:", "slurm_job = '12x'", "not a Slurm job id", "SLURM_JOB_ID"}},
    {BASE "[tenant a]\nslurm_job = 042\n",
     {"t.conf:9:", "slurm_job = '042'", "no leading zero", "SLURM_JOB_ID"}},
    {BASE "[tenant a]\ncgroup = system.slice\n",
     {"t.conf:9:", "cgroup = 'system.slice' must start with '/'", "/proc/PID/cgroup"}},
    {BASE "[tenant a]\nclass = inference\nclass = training\n",
     {"t.conf:10:", "duplicate key 'class'"}},
    {BASE "[tenant a]\nclass = inference\n[tenant a]\n",
     {"t.conf:10:", "duplicate section [tenant a]", "first at line 8"}},
    {BASE "[tenant a b]\n", {"t.conf:8:", "a tenant needs a name", "[tenant inference]"}},
    {BASE "[tenant]\n", {"t.conf:8:", "a tenant needs a name"}},
    {BASE "[tenant caf\xc3\xa9]\n", {"t.conf:8:", "a tenant needs a name"}},
    {BASE "[tenant default]\n", {"t.conf:8:", "'default' is a built-in tenant"}},
    {BASE "[tenant other]\nuid = 0\n", {"t.conf:8:", "'other' is a built-in tenant"}},
    {BASE "[tenants]\nmax_tenants = 1\n", {"t.conf:9:", "max_tenants = '1'", "from 2 to 65536"}},
    {BASE "[tenants]\nfallback = nobody\n",
     {"t.conf:9:", "fallback = 'nobody' is not allowed", "allowed: uid", "default"}},
    {BASE "[tenants]\nslurm_cgroup_root = /user.slice/user-1000.slice\n",
     {"t.conf:9:", "slurm_cgroup_root = '/user.slice/user-1000.slice' is not allowed",
      "user@UID.service"}},
    {BASE "[tenants]\nslurm_cgroup_root = /\n", {"t.conf:9:", "slurm_cgroup_root = '/'"}},
    {BASE "[tenants]\nslurm_cgroup_root = slurm\n",
     {"t.conf:9:", "slurm_cgroup_root = 'slurm' must start with '/'"}},
    {BASE "[tenants]\nimplicit_per_minute = 0\n", {"t.conf:9:", "from 1 to 1000000"}},
    {BASE "[tenants]\nidle_reclaim = 31d\n", {"t.conf:9:", "idle_reclaim", "a duration"}},
    {BASE "[tenant retired]\n", {"t.conf:8:", "'retired' is a built-in tenant"}},
    {BASE "[tenants]\nmax_tenants = 8\nreserved_ids = 7\n",
     {"t.conf:10:", "reserved_ids = 7 is more than max_tenants - 2 = 6"}},
    {BASE "[tenants]\npid_cache = 0\n", {"t.conf:9:", "pid_cache = '0'", "from 1 to"}},
    {BASE "[tenants]\nmax_tenant = 8\n", {"t.conf:9:", "did you mean 'max_tenants'?"}},
    {BASE "[tenants]\n[tenants]\n", {"t.conf:9:", "duplicate section [tenants]"}},
    {BASE "[tenants x]\n", {"t.conf:8:", "section [tenants x] takes no name"}},
    /* QoS: rates, classes, reservations under limits and under the link */
    {BASE "[tenant a]\nlimit = -5M/s\n",
     {"t.conf:9:", "[tenant a] limit = '-5M/s' is not a rate", "200MiB/s", "or none"}},
    {BASE "[tenant a]\nlimit = fast\n", {"t.conf:9:", "limit = 'fast' is not a rate"}},
    {BASE "[tenant a]\nreservation = 100M\n",
     {"t.conf:9:", "reservation = '100M' is not a rate", "bytes per second"}},
    {BASE "[tenant a]\nweight = 0\n", {"t.conf:9:", "weight = '0'", "from 1 to 10000"}},
    {BASE "[tenant a]\nweight = heavy\n", {"t.conf:9:", "weight = 'heavy'"}},
    {BASE "[class training]\nweight = 10001\n", {"t.conf:9:", "from 1 to 10000"}},
    {BASE "[class training]\nlimt = 1G/s\n",
     {"t.conf:9:", "unknown key 'limt' in [class training]", "did you mean 'limit'?"}},
    {BASE "[class fast]\n", {"t.conf:8:", "[class fast]: not a class", "[class inference]"}},
    {BASE "[class]\n", {"t.conf:8:", "not a class"}},
    {BASE "[class inference]\n[class interactive]\n",
     {"t.conf:9:", "duplicate section [class inference]", "first at line 8"}},
    {BASE "[class background]\nreservation = 200M/s\nlimit = 100M/s\n",
     {"t.conf:9:", "[class background] reservation = 200.0 MiB/s is above its limit = 100.0 MiB/s",
      "(line 10)"}},
    {BASE "[tenant a]\nlimit = 10M/s\nreservation = 20M/s\n",
     {"t.conf:10:", "[tenant a] reservation = 20.0 MiB/s is above its limit = 10.0 MiB/s"}},
    /* the tenant's reservation against its class's limit */
    {BASE "[class training]\nlimit = 10M/s\n[tenant a]\nreservation = 20M/s\n",
     {"t.conf:11:", "[tenant a] reservation = 20.0 MiB/s", "([class training] line 9)"}},
    {BASE "[class training]\nreservation = 50M/s\n[tenant a]\nlimit = 10M/s\n",
     {"t.conf:11:", "[tenant a] reservation = 50.0 MiB/s is above its limit = 10.0 MiB/s",
      "(reservation from [class training] line 9)"}},
    {"[backend warm]\ntype = posix\nroot = /srv\nlink_capacity = 1G/s\n[namespace /d]\n"
     "backend = warm\n[mount]\npath = /m\n[tenant a]\nreservation = 600M/s\n[tenant b]\n"
     "reservation = 400M/s\n",
     {"t.conf:4:", "[backend warm] link_capacity = 1.0 GiB/s is less than the reservations",
      "1.1 GiB/s in all", "raise link_capacity"}},
    /* reservations whose sum wraps around 2^64 are still above the link (second review of
     * issue 11: two of 2^63 B/s summed to 0) */
    {"[backend warm]\ntype = posix\nroot = /srv\nlink_capacity = 1G/s\n[namespace /d]\n"
     "backend = warm\n[mount]\npath = /m\n[tenant a]\nreservation = 8388608T/s\n[tenant b]\n"
     "reservation = 8388608T/s\n",
     {"t.conf:4:", "[backend warm] link_capacity = 1.0 GiB/s is less than the reservations"}},
    /* under 1 B/s is not "no limit" */
    {BASE "[tenant a]\nlimit = 0.5/s\n", {"t.conf:9:", "limit = '0.5/s'"}},
    {BASE "[backend x]\ntype = posix\nroot = /x\nlink_capacity = 1Gbit\n",
     {"t.conf:11:", "link_capacity = '1Gbit' is not a rate"}},
    {BASE "[daemon]\nqos_op_cost = 0\n", {"t.conf:9:", "qos_op_cost = '0'"}},
    {BASE "[cache]\ndisk_capacity = fast\n", {"t.conf:9:", "disk_capacity = 'fast' is not a rate"}},
    {BASE "[cache]\ndisk_max_inflight = 0\n", {"t.conf:9:", "disk_max_inflight = '0'"}},
    {BASE "[tenant a]\ndisk_weight = 20000\n", {"t.conf:9:", "disk_weight = '20000'"}},
    {BASE "[class training]\ndisk_limit = 5MB\n",
     {"t.conf:9:", "disk_limit = '5MB' is not a rate"}},
    /* per-namespace TTLs: durations */
    {BASE "[namespace /e]\nbackend = warm\nentry_ttl = soon\n",
     {"t.conf:10:", "[namespace /e] entry_ttl = 'soon' is not allowed"}},
    /* space quotas: a size or none; not 0; not under one block */
    {BASE "[tenant a]\ncache_quota = lots\n", {"t.conf:9:", "cache_quota = 'lots' is not a quota"}},
    {BASE "[tenant a]\ncache_quota = 0\n", {"t.conf:9:", "cache_quota = '0' is not a quota"}},
    {BASE "[tenant a]\ncache_quota = -5G\n", {"t.conf:9:", "is not a quota"}},
    {BASE "[cache]\nblock_size = 1M\n[tenant a]\ncache_quota = 512K\n",
     {"t.conf:11:", "[tenant a] cache_quota = 512.0 KiB is less than one cache block",
      "block_size = 1.0 MiB", "or write none"}},
    {BASE "[tenants]\ncache_quota = 1M\n",
     {"t.conf:9:", "[tenants] cache_quota = 1.0 MiB is less than one cache block"}},
    {BASE "[tenants]\nmax_tenants = 3\n[tenant a]\n[tenant b]\n",
     {"t.conf:9:", "max_tenants = 3 leaves no id for [tenant b] (line 11)",
      "max_tenants = 4 or more"}},
};

static void test_bad_configs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *bc = &bad_cases[i];
        struct tierd_config cfg;
        char err[1024] = "";
        int rc =
            tierd_config_load_string("t.conf", bc->text, strlen(bc->text), &cfg, err, sizeof(err));
        if (rc != -EINVAL)
            fail_msg("case %zu: expected -EINVAL, got %d (%s)\n---\n%s---", i, rc, err, bc->text);
        for (int k = 0; k < 4 && bc->expect[k]; k++) {
            if (!strstr(err, bc->expect[k]))
                fail_msg("case %zu: message \"%s\" lacks \"%s\"\n---\n%s---", i, err, bc->expect[k],
                         bc->text);
        }
        tierd_config_fini(&cfg);
    }
}

static void test_good_config_file(void **state)
{
    (void)state;
    struct tierd_config c;
    char err[1024] = "";
    int rc = tierd_config_load(TIER_CONFIG_DIR "/good.conf", &c, err, sizeof(err));
    if (rc)
        fail_msg("good.conf: %s", err);
    assert_string_equal(c.log_level, "debug");
    assert_int_equal(c.backend_timeout_ms, 5000);
    assert_int_equal(c.stage_threads, 4);
    assert_int_equal(c.cache.block_size, 1 << 20);
    assert_int_equal(c.cache.ram_bytes, 256ULL << 20);
    assert_string_equal(c.cache.disk_dir, "/var/cache/tierd");
    assert_int_equal(c.cache.disk_bytes, 20ULL << 30);
    assert_int_equal(c.cache.disk_min_free_bytes, 2ULL << 30);
    assert_int_equal(c.cache.pin_bytes, 4ULL << 30);
    assert_int_equal(c.cache.policy, CACHE_POLICY_LRU);
    assert_int_equal(c.nbackends, 2);
    assert_string_equal(c.backends[0].name, "warm");
    assert_string_equal(c.backends[0].type, "posix");
    assert_string_equal(c.backends[0].posix.root, "/srv/shared");
    assert_string_equal(c.backends[0].posix.name, "warm");
    assert_int_equal(c.backends[0].conf_line, 16);
    const struct s3_backend_config *s3 = &c.backends[1].s3;
    assert_string_equal(c.backends[1].type, "s3");
    assert_string_equal(s3->name, "cold");
    assert_string_equal(s3->endpoint, "http://127.0.0.1:7480");
    assert_string_equal(s3->region, "eu-west-1");
    assert_string_equal(s3->bucket, "datasets");
    assert_false(s3->path_style);
    assert_string_equal(s3->access_key, "AK");
    assert_string_equal(s3->secret_key, "SK");
    assert_int_equal(s3->max_retries, 3);
    assert_int_equal(s3->max_connections, 8);
    /* backend_timeout 5 s split over 4 attempts */
    assert_int_equal(s3->request_timeout_ms, 1250);
    assert_true(s3->connect_timeout_ms <= 1250);
    assert_int_equal(c.nnamespaces, 2);
    assert_string_equal(c.namespaces[0].path, "/datasets");
    assert_string_equal(c.namespaces[0].backend, "warm");
    assert_string_equal(c.namespaces[0].prefix, "imagenet/");
    assert_int_equal(c.namespaces[0].mode, TIERD_NS_READ_CACHE);
    assert_string_equal(c.namespaces[1].path, "/models/llm");
    assert_string_equal(c.namespaces[1].prefix, "");
    assert_string_equal(c.mount_path, "/mnt/tier");
    assert_int_equal(c.attr_ttl_ms, 2000);
    assert_int_equal(c.entry_ttl_ms, 500);
    assert_int_equal(c.version_list_ttl_ms, 30000);
    assert_int_equal(c.fuse_threads, 8);
    assert_true(c.allow_other);
    assert_int_equal(c.readahead_blocks, 8);
    assert_string_equal(c.api_socket, "/run/tierd/test.sock");
    assert_string_equal(c.api_tcp, "127.0.0.1:7700");
    assert_string_equal(c.api_token, "s3cr3t-0123456789abcdef");
    assert_string_equal(c.file, TIER_CONFIG_DIR "/good.conf");
    tierd_config_fini(&c);
}

static void test_defaults(void **state)
{
    (void)state;
    struct tierd_config c;
    char err[1024] = "";
    int rc = tierd_config_load_string("t.conf", BASE, strlen(BASE), &c, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(c.log_level, "info");
    assert_int_equal(c.backend_timeout_ms, 10000);
    assert_int_equal(c.stage_threads, 16);
    assert_true(c.telemetry); /* [daemon] telemetry: on unless switched off */
    assert_true(c.qos);       /* [daemon] qos: likewise */
    assert_int_equal(c.gpu_sampling, TIERD_GPU_AUTO); /* NVML where it loads */
    assert_int_equal(c.gpu_sample_interval_ms, 5000);
    assert_int_equal(c.cache.block_size, 4 << 20);
    assert_int_equal(c.cache.ram_bytes, 1ULL << 30);
    assert_null(c.cache.disk_dir);
    assert_int_equal(c.cache.disk_bytes, 0);
    assert_int_equal(c.cache.pin_bytes, 512ULL << 20); /* half the RAM level */
    assert_int_equal(c.cache.policy, CACHE_POLICY_S3FIFO);
    assert_int_equal(c.attr_ttl_ms, 1000);
    assert_int_equal(c.entry_ttl_ms, 1000);
    assert_int_equal(c.version_list_ttl_ms, 10000);
    assert_int_equal(c.fuse_threads, 16);
    assert_false(c.allow_other);
    assert_int_equal(c.readahead_blocks, 4);
    assert_int_equal(c.readahead_max_bytes, 64ULL << 20);
    assert_int_equal(c.cache.prefetch_threads, 8);
    assert_int_equal(c.mount_uid, -1); /* tierd's own */
    assert_int_equal(c.mount_gid, -1);
    assert_int_equal(c.mount_umask, -1); /* 022, or 027 with allow_other (fuse_session.c) */
    assert_int_equal(c.max_dir_entries, 1000000);
    assert_false(c.splice_writes); /* off: no test reaches it through a mount here */
    assert_int_equal(c.no_open, TIERD_NO_OPEN_OFF); /* opt-in */
    assert_false(c.cache.disk_verify_every_read);
    tierd_config_fini(&c);
    {
        const char *t3 = BASE "[cache]\nverify_every_read = yes\n";
        char e3[512] = "";
        if (tierd_config_load_string("t.conf", t3, strlen(t3), &c, e3, sizeof(e3)))
            fail_msg("%s", e3);
        assert_true(c.cache.disk_verify_every_read);
        assert_false(c.cache.mrc); /* curves: off unless asked */
        assert_int_equal(c.cache.mrc_halflife_ms, 300000);
        tierd_config_fini(&c);
        const char *t4 = BASE "[cache]\ncurves = on\ncurve_blocks = 1000\ncurve_halflife = 0\n";
        if (tierd_config_load_string("t.conf", t4, strlen(t4), &c, e3, sizeof(e3)))
            fail_msg("%s", e3);
        assert_true(c.cache.mrc);
        assert_int_equal(c.cache.mrc_max_keys, 1000);
        assert_int_equal(c.cache.mrc_halflife_ms, 0);
        tierd_config_fini(&c);
        const char *t5 = BASE "[cache]\ncurve_blocks = 10\n";
        assert_int_not_equal(tierd_config_load_string("t.conf", t5, strlen(t5), &c, e3, sizeof(e3)),
                             0);
        assert_non_null(strstr(e3, "curve_blocks = '10' is not allowed"));
        tierd_config_fini(&c);
        const char *t5b = BASE "[cache]\ncurve_halflife = 1s\n";
        assert_int_not_equal(
            tierd_config_load_string("t.conf", t5b, strlen(t5b), &c, e3, sizeof(e3)), 0);
        assert_non_null(strstr(e3, "curve_halflife = '1s' is not allowed (allowed: 0 for never"));
        tierd_config_fini(&c);
        const char *t6 = BASE "[tenants]\nauto_quota = on\nadvice_interval = 5s\n"
                              "advice_target = 90\n";
        if (tierd_config_load_string("t.conf", t6, strlen(t6), &c, e3, sizeof(e3)))
            fail_msg("%s", e3);
        assert_true(c.auto_quota);
        assert_int_equal(c.advice_interval_ms, 5000);
        assert_int_equal(c.advice_target_util, 90);
        tierd_config_fini(&c);
        const char *t7 = BASE "[tenants]\nadvice_target = 100\n";
        assert_int_not_equal(tierd_config_load_string("t.conf", t7, strlen(t7), &c, e3, sizeof(e3)),
                             0);
        assert_non_null(strstr(e3, "advice_target = '100' is not allowed"));
        tierd_config_fini(&c);
        if (tierd_config_load_string("t.conf", t3, strlen(t3), &c, e3, sizeof(e3)))
            fail_msg("%s", e3); /* what the checks below read */
    }
    assert_int_equal(c.namespaces[0].uid, -1);
    assert_int_equal(c.namespaces[0].gid, -1);
    assert_int_equal(c.namespaces[0].umask, -1);
    assert_string_equal(c.api_socket, "/run/tierd/api.sock");
    assert_null(c.api_tcp);
    assert_null(c.api_token);
    assert_string_equal(c.namespaces[0].prefix, "");
    assert_int_equal(c.backends[0].max_inflight, 0); /* tierd picks 32 (posix) / max_connections */
    assert_int_equal(c.backends[0].breaker_failures, 5);
    assert_int_equal(c.backends[0].breaker_cooldown_ms, 5000);
    assert_int_equal(c.backends[0].split_read_bytes, TIERD_SPLIT_AUTO);
    assert_int_equal(c.max_tenants, 64);
    assert_int_equal(c.tenant_pid_cache, 4096);
    assert_int_equal(c.tenant_reserved_ids, 16); /* a quarter of max_tenants */
    assert_int_equal(c.tenant_implicit_per_minute, 4);
    assert_int_equal(c.tenant_idle_reclaim_ms, 600000);
    assert_false(c.tenant_fallback_default);
    assert_null(c.tenant_slurm_cgroup_root);
    assert_int_equal(c.ntenants, 0);
    /* hint caps: it takes 16 tenants at their caps to fill the shared bounds (sets, memory) */
    assert_int_equal(c.hints_tenant_sets, 4);
    assert_int_equal(c.hints_tenant_bytes, 128ULL << 20);
    assert_int_equal(c.hints_state_bytes, 2048ULL << 20);
    assert_true(HINTS_SETS_MAX / (uint64_t)c.hints_tenant_sets >= 16);
    assert_true(c.hints_state_bytes / c.hints_tenant_bytes >= 16);
    tierd_config_fini(&c);
}

/* [tenants] and [tenant NAME]: the parsed sections, then the registry built from them. */
/* [daemon] telemetry = off (and its spellings) clears the switch; main.c then creates none.
 * [daemon] qos, a switch the same way: off makes main.c set sched_config.qos_off. */
static void test_telemetry_switch(void **state)
{
    (void)state;
    const char *vals[] = {"off", "no", "false", "0", "on"};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char text[1024];
        snprintf(text, sizeof(text), "%s[daemon]\ntelemetry = %s\nqos = %s\n", BASE, vals[i],
                 vals[i]);
        struct tierd_config c;
        char err[1024] = "";
        if (tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)))
            fail_msg("telemetry = %s: %s", vals[i], err);
        assert_int_equal(c.telemetry, strcmp(vals[i], "on") == 0);
        assert_int_equal(c.qos, strcmp(vals[i], "on") == 0);
        tierd_config_fini(&c);
    }
    /* [daemon] gpu_sampling and its interval, as written */
    const char *text = BASE "[daemon]\ngpu_sampling = off\ngpu_sample_interval = 1h\n";
    struct tierd_config c;
    char err[1024] = "";
    if (tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)))
        fail_msg("%s", err);
    assert_int_equal(c.gpu_sampling, TIERD_GPU_OFF);
    assert_int_equal(c.gpu_sample_interval_ms, 3600000);
    tierd_config_fini(&c);
}

/* [backend] split_reads: auto by default; auto, off (or 0) and a size as written. */
static void test_split_reads(void **state)
{
    (void)state;
    const char *vals[] = {"auto", "off", "0", "64K"};
    const uint64_t want[] = {TIERD_SPLIT_AUTO, 0, 0, 64 << 10};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char text[1024], err[512] = "";
        snprintf(text, sizeof(text), "%s[backend w2]\ntype = posix\nroot = /x\nsplit_reads = %s\n",
                 BASE, vals[i]);
        struct tierd_config c;
        if (tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)))
            fail_msg("split_reads = %s: %s", vals[i], err);
        assert_int_equal(c.backends[0].split_read_bytes, TIERD_SPLIT_AUTO);
        assert_int_equal(c.backends[1].split_read_bytes, want[i]);
        tierd_config_fini(&c);
    }
}

/* [tenants] fallback, reserved_ids, implicit_per_minute, slurm_cgroup_root, idle_reclaim:
 * parsed as given. */
static void test_tenants_trust_keys(void **state)
{
    (void)state;
    static const char text[] = BASE "[tenants]\nmax_tenants = 100\nfallback = default\n"
                                    "reserved_ids = 0\nimplicit_per_minute = 50\n"
                                    "slurm_cgroup_root = /slurm_node1/\nidle_reclaim = 0\n";
    struct tierd_config c;
    char err[1024] = "";
    if (tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)))
        fail_msg("%s", err);
    assert_true(c.tenant_fallback_default);
    assert_int_equal(c.tenant_reserved_ids, 0);
    assert_int_equal(c.tenant_implicit_per_minute, 50);
    assert_string_equal(c.tenant_slurm_cgroup_root, "/slurm_node1/");
    assert_int_equal(c.tenant_idle_reclaim_ms, 0);
    struct tenant_reg *r = NULL;
    assert_int_equal(tierd_tenants_open(&c, &r), 0);
    assert_int_equal(tenant_count(r), 2); /* no reclaim: no "retired" */
    tenant_reg_free(r);
    tierd_config_fini(&c);
}

/* tierd_tenant_of_pid (the GPU sampler's tenant_of): a process whose tenant does not exist yet
 * is not resolved and creates none; once a caller made its tenant, it is found. Needs root (the
 * process runs as uid 1001). */
static void test_tenant_of_pid(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    static const char text[] = BASE "[tenants]\nmax_tenants = 100\n";
    struct tierd_config c;
    char err[1024] = "";
    if (tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)))
        fail_msg("%s", err);
    struct tenant_reg *r = NULL;
    assert_int_equal(tierd_tenants_open(&c, &r), 0);
    int go[2], ready[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        close(go[1]);
        close(ready[0]);
        char ch = 'r';
        if (setgid(1001) != 0 || setuid(1001) != 0)
            _exit(1);
        if (write(ready[1], &ch, 1) != 1)
            _exit(1);
        (void)!read(go[0], &ch, 1); /* until the parent closes its end */
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    char ch = 0;
    assert_int_equal(read(ready[0], &ch, 1), 1); /* the child runs as uid 1001 */
    close(ready[0]);
    uint32_t n0 = tenant_count(r), id = 99;
    int rc = tierd_tenant_of_pid(r, (uint32_t)kid, &id);
    assert_int_equal(rc, -ENOENT);
    assert_int_equal(tenant_count(r), n0);
    assert_int_equal(tenant_find(r, "uid-1001", NULL), -ENOENT);
    /* a caller (the mount) makes its tenant; then the sampler finds it */
    uint32_t made = tenant_resolve(r, kid, 1001, 1001).tenant;
    assert_int_equal(tenant_count(r), n0 + 1);
    assert_int_equal(tierd_tenant_of_pid(r, (uint32_t)kid, &id), 0);
    assert_int_equal(id, made);
    /* tierd itself (root): "default"; no process: -ESRCH */
    assert_int_equal(tierd_tenant_of_pid(r, (uint32_t)getpid(), &id), 0);
    assert_int_equal(id, TIER_TENANT_DEFAULT);
    assert_int_equal(tierd_tenant_of_pid(r, 0, &id), -ESRCH);
    close(go[1]);
    int st = 0;
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(tierd_tenant_of_pid(r, (uint32_t)kid, &id), -ESRCH); /* reaped */
    tenant_reg_free(r);
    tierd_config_fini(&c);
}

static void test_tenants(void **state)
{
    (void)state;
    struct tierd_config c;
    char err[1024] = "";
    int rc = tierd_config_load(TIER_CONFIG_DIR "/tenants.conf", &c, err, sizeof(err));
    if (rc)
        fail_msg("tenants.conf: %s", err);
    assert_int_equal(c.max_tenants, 10);
    assert_int_equal(c.tenant_pid_cache, 100);
    assert_int_equal(c.ntenants, 3);
    const struct tierd_tenant_conf *t = c.tenants;
    assert_string_equal(t[0].name, "infer");
    assert_int_equal(t[0].cls, TIER_IO_INFERENCE);
    assert_string_equal(t[0].cgroup, "/system.slice/inference.service");
    assert_null(t[0].slurm_job);
    assert_int_equal(t[0].uid, -1);
    assert_int_equal(t[0].conf_line, 17);
    assert_string_equal(t[1].name, "ckpt");
    assert_int_equal(t[1].cls, TIER_IO_CHECKPOINT);
    assert_string_equal(t[1].slurm_job, "42");
    assert_int_equal(t[1].uid, 0); /* "root" looked up */
    assert_int_equal(t[1].gid, 0);
    assert_string_equal(t[2].name, "named");
    assert_int_equal(t[2].cls, TIER_IO_TRAINING); /* the default class */
    assert_null(t[2].cgroup);

    struct tenant_reg *r = NULL;
    assert_int_equal(tierd_tenants_open(&c, &r), 0);
    assert_int_equal(tenant_max(r), 10);
    assert_int_equal(tenant_count(r), 6); /* default, other, retired and the three sections */
    assert_int_equal(tenant_id_limit(r), 11);
    uint32_t id = 0;
    assert_int_equal(tenant_find(r, "ckpt", &id), 0);
    assert_int_equal(tenant_class(r, id), TIER_IO_CHECKPOINT);
    struct tenant_rule ru[2];
    assert_int_equal(tenant_rules(r, id, ru, 2), 1);
    assert_string_equal(ru[0].slurm_job, "42");
    assert_true(ru[0].has_uid && ru[0].has_gid);
    assert_null(ru[0].cgroup_prefix);
    assert_int_equal(tenant_find(r, "named", &id), 0);
    assert_int_equal(tenant_rules(r, id, ru, 2), 0); /* no match keys: no rule */
    /* the rules act: uid 0 and gid 0 in no job do not match ckpt (slurm_job is ANDed) */
    assert_string_equal(tenant_name(r, tenant_resolve(r, 0, 0, 0).tenant), "default");
    tenant_reg_free(r);
    tierd_config_fini(&c);

    /* more [tenant] sections than the default cap leaves ids for */
    char *text = malloc(64 * 32 + sizeof(BASE));
    assert_non_null(text);
    size_t used = (size_t)snprintf(text, 64 * 32 + sizeof(BASE), "%s", BASE);
    for (int i = 0; i < 63; i++)
        used += (size_t)snprintf(text + used, 64 * 32 + sizeof(BASE) - used, "[tenant t%d]\n", i);
    rc = tierd_config_load_string("t.conf", text, used, &c, err, sizeof(err));
    assert_int_equal(rc, -EINVAL);
    if (!strstr(err, "t.conf:70:") || !strstr(err, "[tenant t62]") ||
        !strstr(err, "set [tenants] max_tenants = 65 or more"))
        fail_msg("unexpected: %s", err);
    tierd_config_fini(&c);
    free(text);
}

static void test_qos(void **state)
{
    (void)state;
    static const char text[] = "[backend warm]\n"
                               "type = posix\n"
                               "root = /srv\n"
                               "link_capacity = 10GiB/s\n"
                               "[namespace /d]\n"
                               "backend = warm\n"
                               "[mount]\n"
                               "path = /m\n"
                               "[daemon]\n"
                               "qos_op_cost = 128K\n"
                               "[cache]\n"
                               "disk_capacity = 2GiB/s\n"
                               "disk_max_inflight = 8\n"
                               "disk_op_cost = 16K\n"
                               "[class inference]\n"
                               "reservation = 1G/s\n"
                               "weight = 100\n"
                               "[class background]\n"
                               "limit = 200 MiB/s\n"
                               "disk_limit = 300MiB/s\n"
                               "disk_weight = 2\n"
                               "[tenants]\n"
                               "cache_quota = none\n"
                               "[tenant infer]\n"
                               "class = inference\n"
                               "reservation = none\n"
                               "limit = 2.5G/s\n"
                               "[tenant batch]\n"
                               "cache_quota = 40G\n"
                               "disk_limit = 1G/s\n"
                               "disk_weight = 5\n"
                               "weight = 3\n"
                               "reservation = 0/s\n";
    struct tierd_config c;
    char err[1024] = "";
    int rc = tierd_config_load_string("q.conf", text, sizeof(text) - 1, &c, err, sizeof(err));
    if (rc)
        fail_msg("q.conf: %s", err);
    assert_int_equal(c.backends[0].link_capacity_bps, 10ull << 30);
    assert_int_equal(c.qos_op_cost, 128u << 10);
    assert_int_equal(c.classes[TIER_IO_INFERENCE].reservation_bps, 1ull << 30);
    assert_int_equal(c.classes[TIER_IO_INFERENCE].weight, 100);
    assert_int_equal(c.classes[TIER_IO_INFERENCE].limit_bps, 0); /* not set: the default */
    assert_int_equal(c.classes[TIER_IO_BACKGROUND].limit_bps, 200u << 20);
    assert_int_equal(c.classes[TIER_IO_TRAINING].weight, 0);
    assert_int_equal(c.class_line[TIER_IO_INFERENCE], 15);
    assert_int_equal(c.tenants[0].qos.reservation_bps, TIERD_RATE_NONE);
    assert_int_equal(c.tenants[0].qos.limit_bps, (uint64_t)(2.5 * (1ull << 30)));
    assert_int_equal(c.tenants[0].qos.limit_line, 27);
    assert_int_equal(c.cache.default_quota, CACHE_QUOTA_NONE);
    assert_int_equal(c.tenants[0].cache_quota, 0); /* not set: [tenants] cache_quota's */
    assert_int_equal(c.tenants[1].cache_quota, 40ull << 30);
    assert_int_equal(c.tenants[1].cache_quota_line, 29);
    assert_int_equal(c.disk_capacity_bps, 2ull << 30);
    assert_int_equal(c.disk_max_inflight, 8);
    assert_int_equal(c.disk_op_cost, 16u << 10);
    assert_int_equal(c.classes[TIER_IO_BACKGROUND].disk_limit_bps, 300u << 20);
    assert_int_equal(c.classes[TIER_IO_BACKGROUND].disk_weight, 2);
    assert_int_equal(c.classes[TIER_IO_BACKGROUND].limit_bps, 200u << 20); /* the link's apart */
    assert_int_equal(c.tenants[1].qos.disk_limit_bps, 1ull << 30);
    assert_int_equal(c.tenants[1].qos.disk_weight, 5);
    assert_int_equal(c.tenants[0].qos.disk_limit_bps, 0);
    assert_int_equal(c.tenants[1].qos.weight, 3);
    assert_int_equal(c.tenants[1].qos.reservation_bps, TIERD_RATE_NONE); /* 0/s is none */
    tierd_config_fini(&c);

    /* nothing set: every QoS value takes its default */
    rc = tierd_config_load_string("t.conf", BASE, strlen(BASE), &c, err, sizeof(err));
    assert_int_equal(rc, 0);
    assert_int_equal(c.qos_op_cost, 64u << 10);
    assert_int_equal(c.backends[0].link_capacity_bps, 0);
    assert_int_equal(c.disk_capacity_bps, 0);
    assert_int_equal(c.disk_max_inflight, 64);
    assert_int_equal(c.disk_op_cost, 4u << 10);
    for (int k = 0; k < TIER_IO_NCLASSES; k++)
        assert_true(c.classes[k].reservation_bps == 0 && c.classes[k].weight == 0 &&
                    c.classes[k].limit_bps == 0 && c.class_line[k] == 0);
    tierd_config_fini(&c);
}

static void test_permissions(void **state)
{
    (void)state;
    struct tierd_config c;
    char err[1024] = "";
    const char *text = BASE "uid = root\ngid = 4242\numask = 027\nmax_dir_entries = 5000\n"
                            "splice_writes = yes\nno_open = off\n[namespace /e]\nbackend = "
                            "warm\nuid = 7\ngid = root\numask = 0\n";
    int rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(c.mount_uid, 0);
    assert_int_equal(c.mount_gid, 4242);
    assert_int_equal(c.mount_umask, 027);
    assert_int_equal(c.max_dir_entries, 5000);
    assert_true(c.splice_writes);
    assert_int_equal(c.no_open, TIERD_NO_OPEN_OFF);
    assert_int_equal(c.namespaces[0].umask, -1); /* as [mount] */
    assert_int_equal(c.namespaces[1].uid, 7);
    assert_int_equal(c.namespaces[1].gid, 0);
    assert_int_equal(c.namespaces[1].umask, 0);
    tierd_config_fini(&c);
}

static void test_writeback(void **state)
{
    (void)state;
    struct tierd_config c;
    char err[1024] = "";
    int rc = tierd_config_load(TIER_CONFIG_DIR "/write_back_good.conf", &c, err, sizeof(err));
    if (rc)
        fail_msg("write_back_good.conf: %s", err);
    assert_string_equal(c.wb_spool_dir, "/var/spool/tierd");
    assert_string_equal(c.wb_journal, "/var/lib/tierd/wb.db");
    assert_int_equal(c.wb_upload_threads, 4);
    assert_int_equal(c.wb_parts_parallel, 8);
    assert_int_equal(c.wb_part_size, 16ULL << 20);
    assert_int_equal(c.wb_max_dirty, 40ULL << 30);
    assert_int_equal(c.wb_max_dirty_age_ms, 600000);
    assert_int_equal(c.wb_backpressure_wait_ms, 30000);
    assert_int_equal(c.wb_upload_deadline_ms, 3600000);
    assert_int_equal(c.wb_upload_holdoff_ms, 0); /* 0 = upload at once */
    assert_int_equal(c.wb_upload_holdoff_max_ms, 120000);
    assert_int_equal(c.wb_retention_keep, 3);
    assert_int_equal(c.wb_durability, TIERD_DURABILITY_REMOTE);
    assert_int_equal(c.nnamespaces, 3);
    assert_int_equal(c.namespaces[0].mode, TIERD_NS_READ_CACHE);
    assert_int_equal(c.namespaces[1].mode, TIERD_NS_WRITE_BACK);
    assert_string_equal(c.namespaces[1].backend, "cold");
    assert_string_equal(c.namespaces[1].prefix, "ckpt/");
    assert_int_equal(c.namespaces[1].durability, TIERD_DURABILITY_REMOTE); /* [writeback] */
    assert_int_equal(c.namespaces[2].mode, TIERD_NS_WRITE_BACK);
    assert_int_equal(c.namespaces[2].durability, TIERD_DURABILITY_LOCAL); /* its own */
    tierd_config_fini(&c);

    /* defaults; the spool sits beside the cache directory */
    const char *text = BASE "[cache]\ndisk_dir = /var/cache/tierd/disk/\n"
                            "[namespace /ck]\nbackend = warm\nmode = write-back\n";
    rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(c.wb_spool_dir, "/var/cache/tierd/spool");
    assert_null(c.wb_journal);
    assert_int_equal(c.wb_upload_threads, 2);
    assert_int_equal(c.wb_parts_parallel, 4);
    assert_int_equal(c.wb_part_size, 8ULL << 20);
    assert_int_equal(c.wb_max_dirty, 0);
    assert_int_equal(c.wb_backpressure_wait_ms, 60000);
    assert_int_equal(c.wb_upload_holdoff_ms, 200);
    assert_int_equal(c.wb_upload_holdoff_max_ms, 30000);
    assert_int_equal(c.wb_retention_keep, 2);
    assert_int_equal(c.wb_durability, TIERD_DURABILITY_LOCAL);
    assert_int_equal(c.namespaces[1].mode, TIERD_NS_WRITE_BACK);
    assert_int_equal(c.namespaces[1].durability, TIERD_DURABILITY_LOCAL);
    tierd_config_fini(&c);
}

/* [api] token_file: read from a file tierd's user owns with mode 0600; a file others may read
 * and a weak token in it are refused with FILE:LINE. */
static void test_api_token_file(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("config_token");
    char tok[512], text[2048], err[1024];
    snprintf(tok, sizeof(tok), "%s/api.token", dir);
    const char good[] = "Zx9vQ2p7Lm4Kc8Rt1Wy6\n";
    tu_write_file(tok, good, strlen(good));
    struct tierd_config c;
    struct {
        mode_t mode;
        const char *content;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {0600, good, NULL},
        {0640, good, "readable by it alone"},
        {0604, good, "chmod 600"},
        {0600, "short\n", "too weak"},
        {0600, "two words in it, long enough\n", "printable ASCII without spaces"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tu_write_file(tok, cases[i].content, strlen(cases[i].content));
        assert_int_equal(chmod(tok, cases[i].mode), 0);
        snprintf(text, sizeof(text), "%s[api]\ntcp = 127.0.0.1:7700\ntoken_file = %s\n", BASE, tok);
        err[0] = '\0';
        int rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
        if (!cases[i].want) {
            assert_int_equal(rc, 0);
            assert_string_equal(c.api_token, "Zx9vQ2p7Lm4Kc8Rt1Wy6");
        } else {
            assert_int_equal(rc, -EINVAL);
            if (!strstr(err, "t.conf:10:") || !strstr(err, cases[i].want))
                fail_msg("case %zu: '%s' lacks t.conf:10: / '%s'", i, err, cases[i].want);
        }
        tierd_config_fini(&c);
    }
    tu_rmtree(dir);
    free(dir);
}

/* The Unix socket's per-uid share: defaults, and admin_connections below max_connections. */
static void test_api_socket_shares(void **state)
{
    (void)state;
    struct tierd_config c;
    char text[2048], err[1024] = "";
    snprintf(text, sizeof(text), "%s[api]\nmax_connections = 10\n", BASE);
    assert_int_equal(tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)),
                     0);
    assert_int_equal(c.api_max_connections_per_uid, 8);
    assert_int_equal(c.api_admin_connections, 5); /* at most half of max_connections */
    assert_int_equal(c.api_user_timeout_ms, 10000);
    tierd_config_fini(&c);
    snprintf(text, sizeof(text),
             "%s[api]\nmax_connections = 10\nadmin_connections = 10\nuser_timeout = 2s\n", BASE);
    assert_int_equal(tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err)),
                     -EINVAL);
    if (!strstr(err, "t.conf:10:") || !strstr(err, "must be below max_connections (10)"))
        fail_msg("'%s' lacks t.conf:10: / the bound", err);
    tierd_config_fini(&c);
}

static void test_file_errors(void **state)
{
    (void)state;
    struct tierd_config c;
    char err[1024] = "";
    int rc = tierd_config_load(TIER_CONFIG_DIR "/typo_key.conf", &c, err, sizeof(err));
    assert_int_equal(rc, -EINVAL);
    assert_non_null(strstr(err, "typo_key.conf:3: unknown key 'blok_size' in [cache] (did you "
                                "mean 'block_size'?)"));
    tierd_config_fini(&c);
    rc = tierd_config_load(TIER_CONFIG_DIR "/write_back.conf", &c, err, sizeof(err));
    assert_int_equal(rc, -EINVAL);
    assert_non_null(strstr(err, "write_back.conf:5:"));
    assert_non_null(strstr(err, "needs a spool directory"));
    tierd_config_fini(&c);
    rc = tierd_config_load(TIER_CONFIG_DIR "/does-not-exist.conf", &c, err, sizeof(err));
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(err, "does-not-exist.conf: cannot open"));
    tierd_config_fini(&c);
}

static void test_long_line_and_comments(void **state)
{
    (void)state;
    char text[4096];
    char longval[1200];
    memset(longval, 'a', sizeof(longval) - 1);
    longval[sizeof(longval) - 1] = '\0';
    snprintf(text, sizeof(text), "%s# comment\n; another\n[api]\ntoken = %s\n", BASE, longval);
    struct tierd_config c;
    char err[1024] = "";
    int rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
    /* either accepted whole or refused with a clear message, never truncated silently */
    if (rc == 0)
        assert_string_equal(c.api_token, longval);
    else
        assert_non_null(strstr(err, "t.conf:11: line too long"));
    tierd_config_fini(&c);
}

static void collect(const char *name, size_t len, void *arg)
{
    char *out = arg;
    size_t used = strlen(out);
    snprintf(out + used, 256 - used, "%.*s,", (int)len, name);
}

static void test_resolve(void **state)
{
    (void)state;
    static const char text[] = "[backend w]\ntype = posix\nroot = /srv\n"
                               "[namespace /data]\nbackend = w\nprefix = ds\n"
                               "[namespace /bulk/many]\nbackend = w\nprefix = /many/\n"
                               "[namespace /bulk/more]\nbackend = w\n"
                               "[mount]\npath = /m\n";
    static struct tierd d;
    char err[512];
    int rc = tierd_config_load_string("t.conf", text, strlen(text), &d.cfg, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    for (size_t i = 0; i < d.cfg.nnamespaces; i++)
        d.ns[i].conf = &d.cfg.namespaces[i];
    d.nns = d.cfg.nnamespaces;

    static const struct {
        const char *path;
        int rc;
        const char *key;
        bool root;
        size_t ns;
    } cases[] = {
        {"/data/x/y.bin", 0, "ds/x/y.bin", false, 0},
        {"/data", 0, "ds/", true, 0},
        {"/data/", 0, "ds/", true, 0},
        {"/bulk/many/a", 0, "many/a", false, 1},
        {"/bulk/more/z", 0, "z", false, 2},
        {"/bulk/more", 0, "", true, 2},
        {"/bulk", -ENOENT, NULL, false, 0},
        {"/datax", -ENOENT, NULL, false, 0},
        {"/", -ENOENT, NULL, false, 0},
        {"/data/../etc", -EINVAL, NULL, false, 0},
        {"/data/a//b", -EINVAL, NULL, false, 0},
        {"data/x", -EINVAL, NULL, false, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tierd_ns *ns = NULL;
        char *key = NULL;
        bool root = false;
        rc = tierd_resolve(&d, cases[i].path, &ns, &key, &root);
        if (rc != cases[i].rc)
            fail_msg("%s: rc %d, expected %d", cases[i].path, rc, cases[i].rc);
        if (rc == 0) {
            assert_string_equal(key, cases[i].key);
            assert_int_equal(root, cases[i].root);
            assert_ptr_equal(ns, &d.ns[cases[i].ns]);
        }
        free(key);
    }
    assert_true(tierd_is_virtual_dir(&d, "/"));
    assert_true(tierd_is_virtual_dir(&d, "/bulk"));
    assert_false(tierd_is_virtual_dir(&d, "/bu"));
    assert_false(tierd_is_virtual_dir(&d, "/data"));
    assert_false(tierd_is_virtual_dir(&d, "/bulk/many"));
    char names[256] = "";
    tierd_virtual_children(&d, "/", collect, names);
    assert_string_equal(names, "data,bulk,"); /* no duplicate for the second /bulk namespace */
    names[0] = '\0';
    tierd_virtual_children(&d, "/bulk", collect, names);
    assert_string_equal(names, "many,more,");
    tierd_config_fini(&d.cfg);
}

/* The error of loading BASE + extra, which must fail; "" if it loaded. */
static void load_error(const char *extra, char *err, size_t errsz)
{
    char text[2048];
    snprintf(text, sizeof(text), "%s%s", BASE, extra);
    struct tierd_config c;
    err[0] = '\0';
    int rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, errsz);
    if (rc == 0)
        err[0] = '\0';
    tierd_config_fini(&c);
}

/* [cluster]: its keys' table (did-you-mean, FILE:LINE), the required name, the checks of the
 * values and the defaults; in a build without librados, the section itself is the error. */
static void test_cluster(void **state)
{
    (void)state;
    char err[1024];
#ifdef TIER_HAVE_RADOS
    load_error("[cluster]\nsecret_file = /s\nshare = no\nname = c1\nnod_id = a\nnode_id = n0\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:12: unknown key 'nod_id' in [cluster] (did you mean "
                                "'node_id'?)"));
    load_error("[cluster]\nsecret_file = /s\nshare = no\npool = p\n", err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:8: [cluster] is missing required key 'name'"));
    load_error("[cluster]\nsecret_file = /s\nshare = no\nname = c1\nlease = 1s\nnode_id = n0\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:12: [cluster] lease = '1s' is not allowed"));
    load_error("[cluster]\nsecret_file = /s\nshare = no\nname = c1\nweight = 0\nnode_id = n0\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:8: [cluster] weight = '0' is not allowed"));
    load_error("[cluster]\nsecret_file = /s\nshare = no\nname = c1\nweight = 1e16\nnode_id = n0\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:8: [cluster] weight = '1e16' is not allowed"));
    load_error("[cluster]\nsecret_file = /s\nshare = no\nname = c/1\n", err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:8: [cluster] name = 'c/1' is not allowed"));
    load_error("[cluster]\nsecret_file = /s\nshare = no\nname = c1\nnode_id = a b\n", err,
               sizeof(err));
    assert_non_null(strstr(err, "[cluster] node_id = 'a b' is not allowed"));

    /* node_id's default is the host name, when that is a node id (this machine's may not be) */
    char host[256] = "";
    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    const char *text = BASE "[cluster]\nname = c1\nsecret_file = /s\nshare = no\n";
    struct tierd_config c;
    int rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
    if (member_id_valid(host)) {
        if (rc)
            fail_msg("%s", err);
        assert_string_equal(c.cluster_node_id, host);
        tierd_config_fini(&c);
    } else {
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(err, "set node_id"));
    }
    text = BASE "[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\naddress = "
                "127.0.0.1:7070\n";
    rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(c.cluster_name, "c1");
    assert_string_equal(c.cluster_ceph_conf, "/etc/ceph/ceph.conf");
    assert_string_equal(c.cluster_user, "admin");
    assert_null(c.cluster_keyring);
    assert_string_equal(c.cluster_pool, "tierd");
    assert_string_equal(c.cluster_node_id, "n0");
    assert_string_equal(c.cluster_address, "127.0.0.1:7070");
    assert_true(c.cluster_weight_val == 1.0);
    assert_int_equal(c.cluster_lease_ms, 10000);
    assert_string_equal(c.cluster_secret_file, "/s");
    assert_true(c.cluster_share);
    assert_int_equal(c.cluster_peer_timeout_ms, 10000); /* backend_timeout's */
    assert_int_equal(c.cluster_peer_inflight, 32);
    assert_true(c.cluster_balance_val == 1.25);
    assert_null(c.cluster_tls_cert);
    tierd_config_fini(&c);
    /* peer_timeout follows backend_timeout (a busy owner answers after its own backend fetch),
     * up to its own bound of 600 s */
    static const struct {
        const char *bt;
        uint64_t want;
    } pt[] = {{"30s", 30000}, {"20m", 600000}};
    for (size_t i = 0; i < sizeof(pt) / sizeof(pt[0]); i++) {
        char t2[512];
        snprintf(t2, sizeof(t2),
                 BASE "[daemon]\nbackend_timeout = %s\n[cluster]\nname = c1\nnode_id = n0\n"
                      "secret_file = /s\naddress = 127.0.0.1:7070\n",
                 pt[i].bt);
        rc = tierd_config_load_string("t.conf", t2, strlen(t2), &c, err, sizeof(err));
        if (rc)
            fail_msg("%s", err);
        assert_int_equal(c.cluster_peer_timeout_ms, pt[i].want);
        tierd_config_fini(&c);
    }

    /* peer reads: the secret, an address to serve on, TLS off loopback, the balance */
    load_error("[cluster]\nname = c1\nnode_id = n0\naddress = 127.0.0.1:1\n", err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:8: [cluster] needs secret_file = PATH"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\n", err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:8: [cluster] share = yes needs address = HOST:PORT"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\naddress = h\n", err,
               sizeof(err));
    assert_non_null(strstr(err, "[cluster] address = 'h' is not HOST:PORT"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\naddress = 10.0.0.7:7\n", err,
               sizeof(err));
    assert_non_null(strstr(err, "is not a loopback address and TLS is not configured"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\naddress = 127.0.0.1:1\n"
               "tls_cert = /c\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "[cluster] TLS needs all of tls_cert, tls_key and tls_ca"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\nshare = no\n"
               "tls_key = /k\ntls_ca = /a\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "[cluster] share = no serves no peer: tls_cert and tls_key"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\nshare = no\n"
               "tls_ca = /a\n",
               err, sizeof(err));
    assert_string_equal(err, ""); /* a consume-only node checks its peers with the CA alone */
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\nshare = no\n"
               "balance = 1\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "[cluster] balance = '1' is not allowed"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\nshare = no\n"
               "peer_inflight = 0\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:13: [cluster] peer_inflight = '0' is not allowed "
                                "(allowed: a whole number from 1 to 4096)"));
    load_error("[cluster]\nname = c1\nnode_id = n0\nsecret_file = /s\nshare = no\n"
               "peer_inflight = 4097\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "[cluster] peer_inflight = '4097' is not allowed"));
    /* a backend may not take the peer lane's name beside a [cluster] (only there) */
    load_error("[backend peers]\ntype = posix\nroot = /p\n[cluster]\nname = c1\nnode_id = n0\n"
               "secret_file = /s\nshare = no\n",
               err, sizeof(err));
    assert_non_null(strstr(err,
                           "t.conf:8: [backend peers]: with a [cluster] section, 'peers' names "
                           "the scheduler lane"));
    load_error("[backend peers]\ntype = posix\nroot = /p\n", err, sizeof(err));
    assert_string_equal(err, "");
    /* [tenant peers] beside a [cluster] is the peers' traffic: no match keys */
    load_error("[tenant peers]\nuid = 1001\n[cluster]\nname = c1\nnode_id = n0\n"
               "secret_file = /s\nshare = no\n",
               err, sizeof(err));
    assert_non_null(strstr(err, "[tenant peers] with a [cluster] section is the peers' traffic"));
    load_error("[tenant peers]\nclass = inference\n[cluster]\nname = c1\nnode_id = n0\n"
               "secret_file = /s\nshare = no\n",
               err, sizeof(err));
    assert_string_equal(err, "");
    load_error("[tenant peers]\nuid = 1001\n", err, sizeof(err));
    assert_string_equal(err, "");

    text = BASE "[cluster]\nname = c1\nnode_id = n1\nweight = 2.5\nlease = 30s\n"
                "address = 10.0.0.7:7070\npool = tp\nuser = tierd\nkeyring = /k\n"
                "secret_file = /s\ntls_cert = /c\ntls_key = /k\ntls_ca = /a\n"
                "peer_timeout = 5s\nbalance = 1.5\npeer_inflight = 8\n";
    rc = tierd_config_load_string("t.conf", text, strlen(text), &c, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(c.cluster_node_id, "n1");
    assert_true(c.cluster_weight_val == 2.5);
    assert_int_equal(c.cluster_lease_ms, 30000);
    assert_string_equal(c.cluster_address, "10.0.0.7:7070");
    assert_string_equal(c.cluster_pool, "tp");
    assert_string_equal(c.cluster_user, "tierd");
    assert_string_equal(c.cluster_keyring, "/k");
    assert_int_equal(c.cluster_peer_timeout_ms, 5000);
    assert_int_equal(c.cluster_peer_inflight, 8);
    assert_true(c.cluster_balance_val == 1.5);
    assert_string_equal(c.cluster_tls_ca, "/a");
    tierd_config_fini(&c);
#else
    load_error("[cluster]\nname = c1\n", err, sizeof(err));
    assert_non_null(strstr(err, "t.conf:8: [cluster]: this tierd was built without librados"));
#endif
    /* without the section, no cluster */
    struct tierd_config n;
    int nrc = tierd_config_load_string("t.conf", BASE, strlen(BASE), &n, err, sizeof(err));
    assert_int_equal(nrc, 0);
    assert_null(n.cluster_name);
    assert_int_equal(n.cluster_line, 0);
    tierd_config_fini(&n);
}

/* Only /.tierd itself and what is below it belong to the mount's control files: a namespace whose
 * first component merely begins with ".tierd" is a namespace like any other. */
static void test_ns_near_tierd(void **state)
{
    (void)state;
    static const char text[] = BASE "[namespace /.tierdx]\nbackend = warm\n"
                                    "[namespace /x/.tierd]\nbackend = warm\n";
    struct tierd_config c;
    char err[512] = "";
    int rc = tierd_config_load_string("t.conf", text, sizeof(text) - 1, &c, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(c.nnamespaces, 3);
    assert_string_equal(c.namespaces[1].path, "/.tierdx");
    assert_string_equal(c.namespaces[2].path, "/x/.tierd");
    tierd_config_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_configs),       cmocka_unit_test(test_good_config_file),
        cmocka_unit_test(test_defaults),          cmocka_unit_test(test_tenants_trust_keys),
        cmocka_unit_test(test_tenants),           cmocka_unit_test(test_writeback),
        cmocka_unit_test(test_file_errors),       cmocka_unit_test(test_api_token_file),
        cmocka_unit_test(test_api_socket_shares), cmocka_unit_test(test_long_line_and_comments),
        cmocka_unit_test(test_resolve),           cmocka_unit_test(test_permissions),
        cmocka_unit_test(test_telemetry_switch),  cmocka_unit_test(test_qos),
        cmocka_unit_test(test_split_reads),       cmocka_unit_test(test_ns_near_tierd),
        cmocka_unit_test(test_cluster),           cmocka_unit_test(test_tenant_of_pid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
