"""A disk cache of computed attentions, so a repeated run skips torch altogether.

One entry is one `<key>.npz` holding `attentions` (L, H, T, T) float32 and the
input `ids` (T,) it was computed for, and with them the rest of the tokenized input
(`arrays.PIECES`: tokens, token types, offsets, word and sequence ids, pieces dropped),
so that a hit found from the text alone (`entries.load_analysed`) needs no tokenizer,
and `mac`: an HMAC-SHA256 of the key and every array, made with the cache's secret.

The key (`keys.cache_key`) is a SHA-256 over everything that changes the numbers: the
*content* of the model folder's files (small files, the config and the tokenizer files
whole; a weight file by its size, its header and 16 samples spread over it), the text,
pair, mask, dtype, truncation and attnviz's version. A weight file rewritten with the
same size and its old mtime restored is a new key.

Trust nothing not checked (a cache folder may be shared, or may have been):
- the folder must be owned by the user and writable by nobody else, unless
  `ATTNVIZ_CACHE_SHARED=1` says the user trusts everyone who can write it; otherwise
  it is not used (one warning), and `attnviz cache clear` refuses to touch it;
- no symbolic link inside it is ever followed: entries are opened with O_NOFOLLOW
  relative to the folder's descriptor, and eviction and `clear` unlink only regular
  files named like entries (unlinking never follows a link);
- an entry is shown only if its `mac` checks out with the secret in `secret.key`, a
  0600 file of the user's in the folder (0640 in a shared one): another user cannot
  forge an entry, nor copy one made for another text or model under this key.

Where: `$ATTNVIZ_CACHE_DIR`, else `$XDG_CACHE_HOME/attnviz`, else
`~/.cache/attnviz` (made mode 0700). Size: at most `$ATTNVIZ_CACHE_MB` mebibytes
(1 MB here is 2**20 bytes, what `du -m` counts; 512 by default), least recently used
out first; a read counts as a use. Off with `--no-cache` or `ATTNVIZ_NO_CACHE=1`.

The cache is an optimisation, never a reason to fail: a corrupt or forged entry is
removed and recomputed, an unusable or untrusted folder means running without the
cache; both with a one-line `warning:` on stderr. Only the standard library and numpy
are imported here, so a cache hit never loads torch or transformers.

One module a job, each importing only those above it in this list (this file imports
nothing; a caller imports the module it uses):
  notices.py     a one-line `warning:` on stderr, once if asked
  settings.py    what the environment says: the folder, on or off, the size bound, shared
  files.py       a regular file opened, or written atomically, never through a link
  names.py       which files in the folder are the cache's own
  folder.py      whether the folder is to be trusted, and its descriptor if so
  secret.py      the folder's HMAC key
  keys.py        the content key: the model folder's files fingerprinted, and the inputs
  contents.py    what the folder holds: eviction, `info`, `clear`
  tokenizers.py  converted tokenizers, kept in a subfolder
  arrays.py      an entry's arrays: read checked from their headers, signed, as pieces
  entries.py     load, store and discard an entry (the only ones importing numpy here,
                 with arrays.py)
"""
