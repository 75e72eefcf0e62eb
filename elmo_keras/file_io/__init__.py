"""Files and downloads: atomic writes and checked reads (`files`), output folders that are safe to
replace (`output_access`), sets of files switched as one change (`file_switch`), HDF5 written
atomically (`hdf5_writer`), the cache folder (`cache_folder`), downloads with resume and their
progress and time limits (`download`, `download_progress`, `deadline`), and pinned release
files (`archives`)."""
