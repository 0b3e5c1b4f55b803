/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops_ro.c - every mutating operation answers EROFS: the file system of read-cache
 * namespaces. When a write-back namespace exists, fuse_ops_write.c replaces the operations it
 * implements with versions that serve write-back paths and answer EROFS elsewhere; the rest
 * (mknod, symlink, link, xattrs, fallocate) stay here. Without these handlers the kernel would
 * report ENOSYS, which tools read as "not implemented" rather than "read-only file system".
 */
#include <errno.h>

#include "fuse/fuse_int.h"

static void ro_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)ino, (void)attr, (void)to_set, (void)fi;
    fuse_reply_err(req, EROFS);
}

static void ro_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    (void)parent, (void)name, (void)mode, (void)rdev;
    fuse_reply_err(req, EROFS);
}

static void ro_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)parent, (void)name, (void)mode;
    fuse_reply_err(req, EROFS);
}

static void ro_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    (void)parent, (void)name;
    fuse_reply_err(req, EROFS);
}

static void ro_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    (void)link, (void)parent, (void)name;
    fuse_reply_err(req, EROFS);
}

static void ro_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    (void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
    fuse_reply_err(req, EROFS);
}

static void ro_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    (void)ino, (void)newparent, (void)newname;
    fuse_reply_err(req, EROFS);
}

static void ro_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)ino, (void)buf, (void)size, (void)off, (void)fi;
    fuse_reply_err(req, EROFS);
}

static void ro_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    (void)ino, (void)name, (void)value, (void)size, (void)flags;
    fuse_reply_err(req, EROFS);
}

static void ro_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    (void)ino, (void)name;
    fuse_reply_err(req, EROFS);
}

static void ro_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    (void)parent, (void)name, (void)mode, (void)fi;
    fuse_reply_err(req, EROFS);
}

static void ro_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                         struct fuse_file_info *fi)
{
    (void)ino, (void)mode, (void)offset, (void)length, (void)fi;
    fuse_reply_err(req, EROFS);
}

void tfs_ops_readonly(struct fuse_lowlevel_ops *ops)
{
    ops->setattr = ro_setattr;
    ops->mknod = ro_mknod;
    ops->mkdir = ro_mkdir;
    ops->unlink = ro_unlink;
    ops->rmdir = ro_unlink;
    ops->symlink = ro_symlink;
    ops->rename = ro_rename;
    ops->link = ro_link;
    ops->write = ro_write;
    ops->setxattr = ro_setxattr;
    ops->removexattr = ro_removexattr;
    ops->create = ro_create;
    ops->fallocate = ro_fallocate;
}
