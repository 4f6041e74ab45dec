//! The cache folder's ownership check: whatever adapt reads back from its
//! cache (fetched files, shards, decompressed copies, member lists) must
//! come from a folder only this user can write, else another user could
//! plant files that are read as cached data.

use crate::RemoteError;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// Creates the cache folder `dir` if it is missing (private: mode 0700)
/// and checks it: the folder (where `dir` is a symbolic link, the folder it
/// points to) must belong to this user and not be writable by every user,
/// and a link must be this user's or the system's (root's).
pub fn check_cache_dir(dir: &Path) -> Result<(), RemoteError> {
    let unsafe_dir = |reason: String| RemoteError::UnsafeCacheDir {
        path: dir.to_owned(),
        reason,
    };
    let io = |source| RemoteError::Io {
        path: dir.to_owned(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    let me = this_user(dir).map_err(io)?;
    let meta = std::fs::metadata(dir).map_err(io)?;
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a folder".into()));
    }
    if meta.uid() != me {
        return Err(unsafe_dir(format!(
            "it belongs to user {}, not to this user ({me})",
            meta.uid()
        )));
    }
    if meta.permissions().mode() & 0o002 != 0 {
        return Err(unsafe_dir("every user may write into it".into()));
    }
    let link = std::fs::symlink_metadata(dir).map_err(io)?;
    if link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
        return Err(unsafe_dir(format!(
            "it is a symbolic link made by user {}",
            link.uid()
        )));
    }
    Ok(())
}

/// This process's user id: the owner of a file it creates in `dir`.
fn this_user(dir: &Path) -> std::io::Result<u32> {
    let probe = dir.join(format!(".owner-{}", std::process::id()));
    let made = std::fs::File::create(&probe).and_then(|f| f.metadata());
    let _ = std::fs::remove_file(&probe);
    Ok(made?.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_folder_passes_and_a_world_writable_one_is_refused() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = t.path().join("cache");
        assert!(check_cache_dir(&dir).is_ok());
        let mode = std::fs::metadata(&dir).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o700));
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777));
        let e = check_cache_dir(&dir)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("every user may write") && e.contains("cache"),
            "{e}"
        );
        // This user's own link to this user's folder is fine.
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        let link = t.path().join("link");
        let _ = std::os::unix::fs::symlink(&dir, &link);
        assert!(check_cache_dir(&link).is_ok());
        // A file in place of the folder.
        let file = t.path().join("file");
        let _ = std::fs::write(&file, b"x");
        assert!(check_cache_dir(&file).is_err());
    }

    #[test]
    fn a_folder_of_another_user_is_refused() {
        // `/` belongs to root: when the tests do not run as root, it is
        // another user's folder (its probe file cannot even be made there).
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let me = this_user(t.path()).unwrap_or_else(|e| panic!("{e}"));
        let e = check_cache_dir(Path::new("/")).err().map(|e| e.to_string());
        assert_eq!(e.is_some(), me != 0, "{e:?}");
    }
}
