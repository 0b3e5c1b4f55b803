/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ctl.h - private to the hint files under /.tierd/hints (fuse_ctl_hints.c: their
 * operations, the closers and the control files' table; fuse_ctl_handle.c: their handles, the
 * buffer bounds and charges, the submission to hints_submit and the status text). The locking is
 * fuse_ctl_hints.c's header's.
 */
#ifndef TIER_FUSE_FUSE_CTL_H
#define TIER_FUSE_FUSE_CTL_H

#include "fuse/fuse_int.h"
#include "hints/hints.h"

#define CTL_FILE_MAX (32ull << 20)   /* bytes of one hint file (the API's admin body bound) */
#define CTL_TOTAL_MAX (256ull << 20) /* bytes of all hint files being written at once */
/* bytes of the hint files one tenant's writers who are no administrators have open at once:
 * four files of the users' bound, so that one tenant cannot take CTL_TOTAL_MAX from the rest
 * (16 tenants at their share fill it) */
#define CTL_TENANT_MAX (4 * (HINTS_USER_BYTES_MAX + 1ull))
#define CTL_BUF_MIN (64u << 10) /* a buffer's first allocation */
/* tenants with writers' buffers at once: each holds CTL_BUF_MIN at least, so CTL_TOTAL_MAX runs
 * out before the slots do */
#define CTL_CHARGES (CTL_TOTAL_MAX / CTL_BUF_MIN)
#define CTL_CLOSERS 4 /* closer threads: one slow close holds up no other handle's */
#define CTL_HINTS TFS_CTL_DIR "/hints"
#define CTL_TEXT_MAX 2048 /* the status text of one set */

struct tfs_ctlh;

/* A flush, fsync or release of a writer handle, for a closer thread to serve and answer. */
enum job_kind { JOB_FLUSH, JOB_FSYNC, JOB_RELEASE };
struct ctl_job {
    struct ctl_job *next;
    fuse_req_t req;
    struct tfs_ctlh *h;
    enum job_kind kind;
};

/* The bytes one tenant's writers who are no administrators hold in buffers (charge_mu). */
struct ctl_charge {
    uint32_t tenant;
    uint64_t bytes; /* 0: a free slot */
};

struct tfs_ctl {
    struct fuse_lowlevel_ops inner; /* the operations for every other path (immutable) */
    pthread_mutex_t mu;
    struct tfs_ctlh *writers;  /* mu: open writer handles */
    _Atomic uint64_t buffered; /* bytes allocated by the writers' buffers */
    pthread_mutex_t charge_mu; /* a leaf lock: taken with a handle's mu held */
    struct ctl_charge charges[CTL_CHARGES];
    /* the closers: submissions at close, off the FUSE workers (qmu) */
    pthread_mutex_t qmu;
    struct ctl_closer {
        struct tierd_fuse *fs;
        pthread_cond_t cv;
        struct ctl_job *head, *tail; /* qmu: its jobs, served in order */
        unsigned load;               /* qmu: jobs queued or being served */
        bool on;                     /* started (immutable after tfs_ctl_init) */
        pthread_t th;
    } closers[CTL_CLOSERS];
    bool qstop; /* qmu */
};

/* fi->fh of a control file. */
struct tfs_ctlh {
    struct tfs_hbase hb;          /* TFS_H_CTL */
    struct tfs_ctlh *prev, *next; /* ctl->mu: on ctl->writers (writers only) */
    char name[HINTS_NAME_MAX];    /* immutable */
    uint32_t tenant;              /* the opener's (immutable) */
    bool writer;                  /* opened for writing (immutable) */
    bool admin;                   /* the opener is root or tierd's uid (immutable) */
    bool append_flag;             /* opened with O_APPEND (immutable) */
    _Atomic bool cancelled;       /* the file was unlinked: nothing more is submitted */
    struct ctl_job release_job;   /* its release, queued without an allocation (writers) */
    unsigned queued;              /* ctl->qmu: its jobs queued or being served */
    unsigned closer;              /* ctl->qmu: the closer serving them (while queued > 0) */
    pthread_mutex_t mu;
    char *buf; /* mu: what was written, NUL-terminated at len */
    size_t len, cap;
    size_t taken;           /* mu: bytes handed to hints_submit already (never rewritten) */
    uint64_t line0;         /* mu: lines in the taken bytes (line numbers in messages) */
    size_t checked;         /* mu: bytes whose complete lines write checked (a line boundary) */
    uint64_t checked_lines; /* mu: lines in the checked bytes */
    bool nocheck;           /* mu: a write went below checked: only flush checks */
    bool dirty;             /* mu: written, truncated or created since the last submission */
    bool submitted;         /* mu: a submission happened: the later ones append */
    int err;                /* mu: sticky error (write beyond the bound, failed submission) */
    char *text;             /* mu: the status read returns, made at offset 0 */
    size_t tlen;
};

/* ---- the sets and the handles (fuse_ctl_handle.c) ---- */
const char *tfs_ctl_tenant_name(const struct tierd_fuse *fs, uint32_t tenant);
/* The set (tenant, name) into *out (may be NULL): true if it exists. */
bool tfs_ctl_find_set(struct tierd_fuse *fs, uint32_t tenant, const char *name,
                      struct hints_set_stats *out);
/* Does hint file name exist for tenant (the set, or a writer has it open)? */
bool tfs_ctl_file_exists(struct tierd_fuse *fs, uint32_t tenant, const char *name);
/* May the caller of req give hints, and as which tenant? Tenants default and other are every
 * unmatched caller's: only root and tierd's own uid may hint for them (as an administrator may
 * through the API). */
int tfs_ctl_may_hint(struct tierd_fuse *fs, fuse_req_t req, const char *name, uint32_t *tenant,
                     bool *admin);
/* A new handle on hint file name; writers are checked (tfs_ctl_may_hint) and listed. */
int tfs_ctl_handle_open(struct tierd_fuse *fs, fuse_req_t req, const char *name, int flags,
                        bool created, struct tfs_ctlh **out);
void tfs_ctl_handle_free(struct tierd_fuse *fs, struct tfs_ctlh *h);
/* Put h in fi (direct_io: reads ask for the status text each time). */
void tfs_ctl_handle_fi(struct fuse_file_info *fi, struct tfs_ctlh *h);
/* h->mu held: hand what was written since the last submission to hints_submit (last: the
 * release); 0 when there was nothing to hand over. */
int tfs_ctl_submit_locked(struct tierd_fuse *fs, struct tfs_ctlh *h, const char *when, bool last);
/* The same, taking h->mu. */
int tfs_ctl_submit(struct tierd_fuse *fs, struct tfs_ctlh *h, const char *when, bool last);
/* h->mu held: make the text read returns. */
int tfs_ctl_status_make(struct tierd_fuse *fs, struct tfs_ctlh *h);
/* h->mu held: room for end bytes (and the NUL) in h->buf, within the bounds (charged). */
int tfs_ctl_reserve(struct tierd_fuse *fs, struct tfs_ctlh *h, uint64_t end);
/* h->mu held: check the lines the last write completed (EINVAL from write(2) for a bad one). */
int tfs_ctl_check_new_lines(struct tierd_fuse *fs, struct tfs_ctlh *h);

#endif
