"""The Skills extension (`io.modelcontextprotocol/skills`, SEP-2640): Agent Skills served as resources.

A skill is a directory holding a `SKILL.md` (YAML front matter with `name` and
`description`, read by `frontmatter.py`, then instructions) and any supporting files.
`Skills(server)` declares the extension; `add_directory(root)` serves every skill below
a directory, `add(path, markdown, files)` one skill from code. Each file is a resource
`skill://<skill-path>/<file-path>` in `resources/list` and `resources/read` (a
`SKILL.md` as `text/markdown`, named and described from its front matter), and the
extension's methods answer from what was loaded:

- `skills/list`: entries `{uri, frontmatter, resources}`, paged, with `ttlMs` and `cacheScope`;
- `skills/get`: the entry of one `SKILL.md` URI (-32602 for a URI that is no skill);
- `resources/directory/read`: a directory's direct children, subdirectories as
  `inode/directory` (-32602 for a URI that is no directory).

An entry's `resources` is the skill's complete manifest: every file's URI, `sha256:`
digest and size, or `"dynamic"` when a file is generated at read time. Files are read
once, when loaded, so what is served is what was digested and a read never touches the
disk. Refused at load with a `SkillError`, before anything is registered: names outside
the Agent Skills rules, more than 512 files or 16 MiB in a skill, a symlink leading out
of its skill or to a directory, anything but regular files. Names starting with `.`
are not served. See ADR 37.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union
from urllib.parse import quote

from ._app.catalog import decode_cursor, encode_cursor
from ._app.resources import Resource
from ._wire.jsonrpc import invalid_params
from .frontmatter import FrontMatterError, parse_front_matter

if TYPE_CHECKING:
    from ._app.context import Context
    from ._serving.server import Server

__all__ = ["EXTENSION", "MAX_BYTES", "MAX_FILES", "SkillError", "Skills"]

EXTENSION = "io.modelcontextprotocol/skills"
MAX_FILES = 512  # per skill, SKILL.md and nested skills' files included
MAX_BYTES = 16 * 1024 * 1024  # per skill, summed over its files
SKILL_FILE = "SKILL.md"
DIRECTORY = "inode/directory"
MAX_DESCRIPTION = 1024  # characters (the Agent Skills specification)

Content = Union[str, bytes, Callable[..., Any]]  # a callable: generated at each read (a "dynamic" skill)
Place = tuple[str, ...]  # a place in the skill namespace: the skill path's segments, then the file's

_NAME = re.compile(r"(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?")
_AUTHORITY = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=]+")  # an RFC 3986 reg-name, no %-escapes
_SEGMENT = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@]+")  # an RFC 3986 path segment, no %-escapes
_SEGMENT_SAFE = "!$&'()*+,;=:@"  # kept by quote() besides letters, digits and -._~
_TEXT_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".yaml": "application/yaml",
               ".yml": "application/yaml", ".toml": "application/toml"}  # missing from Python's own table
_KNOWN_TYPES = mimetypes.MimeTypes()  # Python's built-in table only, not the machine's: the same on every host


class SkillError(ValueError):
    """A skill that cannot be served as it is: the message names the file and the rule."""


def _uri(path: Place) -> str:
    return "skill://" + "/".join(quote(segment, safe=_SEGMENT_SAFE) for segment in path)


def _directory(path: Place) -> dict[str, Any]:
    """How a directory is listed among its parent's children."""
    return {"uri": _uri(path), "name": path[-1], "mimeType": DIRECTORY}


def _mime_type(name: str, content: Content) -> str | None:
    """By file name; else text/plain or application/octet-stream (None for generated content)."""
    suffix = os.path.splitext(name)[1].lower()
    known = _TEXT_TYPES.get(suffix) or _KNOWN_TYPES.guess_type(name)[0]
    if known or callable(content):
        return known
    return "text/plain" if isinstance(content, str) else "application/octet-stream"


def _raw(content: Content) -> bytes | None:
    """The bytes a digest covers (None for generated content, which has none until read)."""
    if callable(content):
        return None
    return content.encode() if isinstance(content, str) else content


def _text_or_bytes(data: bytes) -> str | bytes:
    """A file's bytes as text when they are UTF-8 (served as `text`), else as they are (a `blob`)."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def _skill_path(segments: Place) -> Place:
    """A skill path (`("acme", "billing", "refunds")`), checked: its first segment is a URI reg-name (the
    authority), the others URI path segments, from code or from the directories on disk alike."""
    path = "/".join(segments)
    for index, segment in enumerate(segments):
        pattern = _AUTHORITY if index == 0 else _SEGMENT
        if segment in ("", ".", "..") or not pattern.fullmatch(segment):
            kind = "the URI authority, a reg-name" if index == 0 else "a URI path segment"
            raise SkillError(f"skill path {path!r}: {segment!r} is not {kind}; "
                             "use letters, digits and -._~ (not '.' or '..')")
    return segments


def _file_path(name: str, skill: str) -> Place:
    """A file's path inside its skill, from code (`references/GUIDE.md`), checked."""
    segments = tuple(name.split("/"))
    if any(segment in ("", ".", "..") for segment in segments):
        raise SkillError(f"skill {skill!r}: file {name!r} must be a relative path inside the skill "
                         "(no '', '.' or '..')")
    if segments == (SKILL_FILE,):
        raise SkillError(f"skill {skill!r}: SKILL.md is the markdown argument, not one of the files")
    return segments


def _front_matter(skill: Place, markdown: Content) -> dict[str, Any]:
    """A skill's front matter, checked against the Agent Skills rules and the skill's path."""
    where = _uri(skill + (SKILL_FILE,))
    if not isinstance(markdown, str):
        raise SkillError(f"{where}: SKILL.md must be UTF-8 text")
    try:
        found = parse_front_matter(markdown)
    except FrontMatterError as error:
        raise SkillError(f"{where}: {error}") from None
    name, description = found.get("name"), found.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SkillError(f"{where}: name {name!r} breaks the Agent Skills rules: 1 to 64 of a-z, 0-9 and '-', "
                         "neither first nor last nor doubled")
    if name != skill[-1]:
        raise SkillError(f"{where}: name {name!r} must equal the skill's directory name {skill[-1]!r}")
    if not isinstance(description, str) or not 0 < len(description) <= MAX_DESCRIPTION:
        raise SkillError(f"{where}: description must be text of 1 to {MAX_DESCRIPTION} characters")
    return found


def _check_size(skill: Place, files: int, size: int) -> None:
    if files > MAX_FILES:
        raise SkillError(f"{_uri(skill)}: more than {MAX_FILES} files in one skill")
    if size > MAX_BYTES:
        raise SkillError(f"{_uri(skill)}: more than {MAX_BYTES} bytes (16 MiB) in one skill")


def _manifest(skill: Place, contents: Mapping[Place, Content]) -> list[dict[str, Any]] | str:
    """A skill's `resources`: SKILL.md then every other file under it, digested; "dynamic" if any is generated."""
    own = skill + (SKILL_FILE,)
    mine = sorted((path for path in contents if path[: len(skill)] == skill), key=lambda path: (path != own, path))
    raw = {path: data for path in mine if (data := _raw(contents[path])) is not None}
    _check_size(skill, len(mine), sum(map(len, raw.values())))
    if len(raw) < len(mine):
        return "dynamic"
    return [{"uri": _uri(path), "digest": "sha256:" + hashlib.sha256(raw[path]).hexdigest(), "size": len(raw[path])}
            for path in mine]


def _static(content: str | bytes) -> Callable[[], Any]:
    async def read() -> str | bytes:
        return content

    return read


def _page(items: Sequence[dict[str, Any]], cursor: Any, size: int) -> tuple[list[dict[str, Any]], str | None]:
    """One page of `items` from an opaque cursor (None: the first), and the next page's cursor."""
    start = 0 if cursor is None else decode_cursor(cursor)
    if start and start >= len(items):
        raise invalid_params("Invalid cursor: it does not point into this list", {"cursor": cursor})
    end = start + size
    return list(items[start:end]), encode_cursor(end) if end < len(items) else None


class Skills:
    """The skills one server serves (see the module docstring): `Skills(server)` declares the
    extension, with `directoryRead`; `add_directory` and `add` load skills, all checked first."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._entries: dict[str, dict[str, Any]] = {}  # SKILL.md URI → skills/list entry, in load order
        self._directories: dict[str, dict[str, dict[str, Any]]] = {}  # directory URI → child URI → its listing
        # The extension's files are read through resources/read, so a host needs the resources capability to
        # read them, even before (or without) any skill being loaded.
        server.offers_resources = True
        extension = server.extension(EXTENSION, {"directoryRead": True})
        # A host calls these after reading server/discover; its own capabilities need not name the extension.
        extension.method("skills/list", declared=False)(self._list)
        extension.method("skills/get", declared=False)(self._get)
        extension.method("resources/directory/read", declared=False)(self._read_directory)

    def add(self, path: str, markdown: str, files: Mapping[str, Content] | None = None) -> str:
        """Serve one skill from code at `skill://<path>/SKILL.md`; its URI. `files` maps paths inside the
        skill (`references/GUIDE.md`) to text, bytes, or a resource function generating them at each read
        (which makes the skill's manifest "dynamic")."""
        skill = _skill_path(tuple(path.split("/")))
        contents: dict[Place, Content] = {skill + (SKILL_FILE,): markdown}
        for name, content in (files or {}).items():
            contents[skill + _file_path(name, path)] = content
        directories = {key[:depth] for key in contents for depth in range(len(skill), len(key))}
        return self._publish([skill], contents, directories)[0]

    def add_directory(self, root: str | os.PathLike[str]) -> list[str]:
        """Serve every skill below `root` (each directory holding a SKILL.md), at its path relative to
        `root`: `root/acme/refunds/SKILL.md` is `skill://acme/refunds/SKILL.md`. The skills' URIs."""
        base = Path(root)
        if not base.is_dir():
            raise SkillError(f"{base}: not a directory")
        skills, contents, directories = _scan(base)
        for skill in skills:
            _skill_path(skill)
        return self._publish(skills, contents, directories)

    # -- loading ----------------------------------------------------------

    def _publish(self, skills: list[Place], contents: dict[Place, Content], directories: set[Place]) -> list[str]:
        """Check everything, then register the files as resources and the skills' entries."""
        front = {skill: _front_matter(skill, contents[skill + (SKILL_FILE,)]) for skill in skills}
        entries = [{"uri": _uri(skill + (SKILL_FILE,)), "frontmatter": front[skill],
                    "resources": _manifest(skill, contents)} for skill in skills]
        resources = [self._resource(path, content, front.get(path[:-1])) for path, content in sorted(contents.items())]
        taken = [r.key for r in resources if self.server.resources.get(r.key) is not None]
        if taken:
            raise SkillError(f"already served: {', '.join(taken[:3])}")
        for resource, path in zip(resources, sorted(contents)):
            self.server.resources.add(resource)
            self._link(path, resource.describe())
        for directory in directories:
            self._directories.setdefault(_uri(directory), {})
            self._link(directory, _directory(directory))
        for entry in entries:
            self._entries[entry["uri"]] = entry
        return [entry["uri"] for entry in entries]

    def _resource(self, path: Place, content: Content, front: dict[str, Any] | None) -> Resource:
        """The resource serving one file; a skill's SKILL.md is named and described by its front matter."""
        described = front if path[-1] == SKILL_FILE else None
        data = _raw(content)
        resource = Resource(
            content if callable(content) else _static(content),
            _uri(path),
            name=described["name"] if described else path[-1],
            description=described["description"] if described else None,
            mime_type=_mime_type(path[-1], content),
            size=None if data is None else len(data),
        )
        if any(param.required for param in resource.info.params):
            raise SkillError(f"{_uri(path)}: a function generating a file takes no arguments (a Context at most)")
        return resource

    def _link(self, path: Place, child: dict[str, Any]) -> None:
        """Make `child` (at `path`) a child of its directory, and each directory above a child of its own."""
        while len(path) > 1:
            self._directories.setdefault(_uri(path[:-1]), {})[_uri(path)] = child
            path = path[:-1]
            child = _directory(path)

    # -- the methods ------------------------------------------------------

    def _cacheable(self, result: dict[str, Any]) -> dict[str, Any]:
        hints = self.server.cache  # the server's defaults: skills carry no hints of their own
        result.update(ttlMs=hints.ttl_ms, cacheScope=hints.cache_scope)
        return result

    def _listing(self, field: str, items: Sequence[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        """The page of `items` the request's cursor names, at the server's page size."""
        page, next_cursor = _page(items, params.get("cursor"), self.server.resources.page_size)
        result: dict[str, Any] = {field: page}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return self._cacheable(result)

    def _list(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return self._listing("skills", list(self._entries.values()), params)

    def _get(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        entry = _named(params, self._entries, "skills/get", "skill")
        return self._cacheable({"skill": entry})

    def _read_directory(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        children = _named(params, self._directories, "resources/directory/read", "directory")
        return self._listing("resources", [children[key] for key in sorted(children)], params)


# -- reading a directory of skills ---------------------------------------------


def _scan(root: Path) -> tuple[list[Place], dict[Place, Content], set[Place]]:
    """The skills below `root`, the bytes of every file inside one, and every directory inside one.

    Top-down, so a directory's skill (its own or the nearest above it) is known when it is read."""
    skills: list[Place] = []
    contents: dict[Place, Content] = {}
    directories: set[Place] = set()
    totals: dict[Place, list[int]] = {}  # skill → [files, bytes], checked as it grows

    def refuse(error: OSError) -> None:
        raise SkillError(f"{error.filename}: cannot be read ({error.strerror})")

    for here, dirnames, filenames in os.walk(root, onerror=refuse):  # symlinked directories are not entered
        place = Path(here).relative_to(root).parts
        dirnames[:] = sorted(name for name in dirnames if not name.startswith("."))
        names = sorted(name for name in filenames if not name.startswith("."))
        if SKILL_FILE in names:
            if not place:
                raise SkillError(f"{root} is itself a skill: pass the directory that holds it")
            skills.append(place)
        for name in dirnames:  # os.walk does not enter them: refused rather than silently left out, above a skill too
            if Path(here, name).is_symlink():
                raise SkillError(f"{Path(here, name)}: a symlinked directory is not served; copy it, or link its files")
        owners = [skill for skill in skills if place[: len(skill)] == skill]
        if not owners:
            continue  # above any skill: only a prefix of skill paths
        directories.add(place)
        home = root.joinpath(*max(owners, key=len)).resolve()
        for name in names:
            data = _read_file(Path(here, name), home)
            contents[place + (name,)] = _text_or_bytes(data)
            for owner in owners:
                total = totals.setdefault(owner, [0, 0])
                total[0], total[1] = total[0] + 1, total[1] + len(data)
                _check_size(owner, *total)
    return skills, contents, directories


def _read_file(path: Path, home: Path) -> bytes:
    """A regular file's bytes; through a symlink only when the link stays inside `home`, its skill."""
    try:
        if path.is_symlink() and not path.resolve().is_relative_to(home):
            raise SkillError(f"{path}: a symlink out of its skill's directory is not served")
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise SkillError(f"{path}: not a regular file")
        if info.st_size > MAX_BYTES:
            raise SkillError(f"{path}: more than {MAX_BYTES} bytes (16 MiB), the limit of a whole skill")
        with path.open("rb") as file:
            return file.read(MAX_BYTES + 1)
    except OSError as error:
        raise SkillError(f"{path}: cannot be read ({error.strerror})") from None


def _named(params: dict[str, Any], served: Mapping[str, Any], method: str, what: str) -> Any:
    """What `params.uri` names in `served` (-32602 when it is no string, or not a served {what})."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise invalid_params(f'{method} needs a string "uri": the URI of a {what}')
    if uri not in served:
        raise invalid_params(f"Not a {what} this server serves: {uri}", {"uri": uri})
    return served[uri]
