"""The lab registry: images by the names people type, pulled the way a cluster online pulls.

The lab has no internet, yet ``kubectl create deployment web --image=nginx`` must work: an
untagged image defaults to ``imagePullPolicy: Always``, so containerd pulls.  The lab runs the
CNCF distribution registry (Debian's ``docker-registry``) inside its own network, and every
node's containerd mirrors the public registries to it:

- **public** (``http://REGISTRY:5000``, no credentials): each image stored under its full
  name, registry host included (``docker.io/library/nginx``, ``registry.k8s.io/pause``), so
  one registry mirrors several without collisions.  containerd's ``hosts.toml`` for each
  mirrored registry (``MIRRORED``) names the path prefix (``/v2/docker.io``, with
  ``override_path``) both as its host and as its ``server``: nothing ever falls back to the
  real registry, so a name the lab lacks fails at once with the registry's 404 instead of a
  DNS timeout;
- **private** (``http://REGISTRY:5001``, htpasswd basic auth, user ``kubelab`` and a password
  made at ``up``): the registry host ``private.kubelab.test`` (a reserved name, never
  resolved: ``hosts.toml`` says where it is) for pull-secret exercises; the distribution
  registry authenticates a whole instance, so the private repositories get an instance of
  their own.

Plain HTTP rather than TLS: both registries are reached only on the lab's own underlay, and
HTTP needs no certificate in every node's containerd configuration, none re-issued when a node
joins and none on the Vagrant VMs; credentials cross the lab's bridge only, as everything else
there does.

REGISTRY is the router's address (10.240.0.1), or on VMs the control-plane VM's.  Storage is
under ``Lab.registry_dir``, so ``lab down`` removes it.  ``up`` pushes every image the lab builds
(``seed``) with skopeo from inside the registry's namespace, under the names people type:
``latest``, the packaged version and its major.minor and major for busybox, nginx and python,
the recipe's own tags for the others, and a copy of busybox in the private registry.

What runs is in ``kubelab.lab.components`` (``registry``, ``private_registry``); this module
renders their configuration and containerd's ``hosts.toml`` files (pure), and pushes, lists
and resolves names (through ``kubelab.lab.processes.run``: skopeo and curl in the namespace).
"""

from __future__ import annotations

import json
import secrets
import tarfile
import time
import urllib.parse
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kube.imagename import ImageName, ImageNameError
from kubelab.lab.images import ALL_IMAGES, Recipe, build_images, recipe
from kubelab.lab.processes import CommandError, run
from kubelab.lab.topology import PRIVATE_REGISTRY_PORT, REGISTRY_PORT, Lab
from node.kubelet.runtimeconfig import hosts_toml

MIRRORED: Final = ("docker.io", "registry.k8s.io", "quay.io", "ghcr.io", "gcr.io")
"""The public registries every node's containerd pulls from the lab registry instead."""
PRIVATE_HOST: Final = "private.kubelab.test"
PRIVATE_USER: Final = "kubelab"
PRIVATE_SEED: Final = f"{PRIVATE_HOST}/kubelab/busybox"
"""The private repository ``up`` fills (busybox's image): it pulls only with credentials."""
VERSIONED: Final = {"busybox": "busybox-static", "nginx": "nginx-light", "python": "python3"}
"""Images tagged with the version of the Debian package they are made of."""
PUSH_TIMEOUT: Final = 300.0
CATALOG_SIZE: Final = 1000


class RegistryError(Exception):
    """What a user did cannot be done; the message is one line saying why."""


@dataclass(frozen=True)
class LabRegistry:
    """Where one lab's registries live: their directory, address and namespace (None: the
    host itself, as on the Vagrant VMs)."""

    directory: Path
    address: str
    netns: Path | None

    @classmethod
    def of(cls, lab: Lab) -> LabRegistry:
        node = lab.registry_node
        return cls(lab.registry_dir, node.ip, None if lab.vms else node.netns_path)

    def host(self, private: bool = False) -> str:
        """``ADDRESS:PORT`` of the public (or private) registry."""
        return f"{self.address}:{PRIVATE_REGISTRY_PORT if private else REGISTRY_PORT}"

    def url(self, private: bool = False) -> str:
        return f"http://{self.host(private)}"

    def config_file(self, private: bool = False) -> Path:
        return self.directory / ("private.json" if private else "public.json")

    def storage(self, private: bool = False) -> Path:
        return self.directory / ("private" if private else "public")

    @property
    def htpasswd(self) -> Path:
        return self.directory / "htpasswd"

    @property
    def password_file(self) -> Path:
        """The private registry's password for ``PRIVATE_USER`` (root only)."""
        return self.directory / "password"


def config(registry: LabRegistry, private: bool = False) -> str:
    """The distribution registry's configuration (JSON is YAML too)."""
    auth = {"htpasswd": {"realm": "kubelab-private", "path": str(registry.htpasswd)}}
    document = {
        "version": "0.1",
        "log": {"level": "info", "fields": {"service": "registry"}},
        "storage": {
            "filesystem": {"rootdirectory": str(registry.storage(private))},
            "delete": {"enabled": True},
        },
        "http": {
            "addr": registry.host(private),
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        },
        **({"auth": auth} if private else {}),
    }
    return json.dumps(document, indent=1) + "\n"


def mirror_hosts(registry: LabRegistry, hosts_dir: Path) -> dict[Path, str]:
    """containerd's ``hosts.toml`` files (under its ``config_path``): each mirrored registry
    to its path in the public registry, the private host to the private registry, and both
    registries' own addresses to themselves over HTTP."""
    files = {
        hosts_dir / host / "hosts.toml": hosts_toml(f"{registry.url()}/v2/{host}", True)
        for host in MIRRORED
    }
    files[hosts_dir / PRIVATE_HOST / "hosts.toml"] = hosts_toml(registry.url(private=True))
    for private in (False, True):
        files[hosts_dir / registry.host(private) / "hosts.toml"] = hosts_toml(registry.url(private))
    return files


# -- credentials ------------------------------------------------------------------------------


def _bcrypt(password: str) -> str:
    """A bcrypt hash (the only kind the registry's htpasswd accepts), from the C library."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # deprecated (gone in 3.13); glibc's libxcrypt does bcrypt

    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))


def write_credentials(registry: LabRegistry) -> None:
    """The private registry's password (made once) and htpasswd file."""
    registry.directory.mkdir(parents=True, exist_ok=True)
    if not registry.password_file.is_file():
        registry.password_file.touch(mode=0o600)
        registry.password_file.write_text(secrets.token_urlsafe(18) + "\n")
    registry.htpasswd.touch(mode=0o600)
    registry.htpasswd.write_text(f"{PRIVATE_USER}:{_bcrypt(password(registry))}\n")


def password(registry: LabRegistry) -> str:
    try:
        return registry.password_file.read_text().strip()
    except OSError as error:
        raise RegistryError(f"no private registry password: {error}") from None


# -- names ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """Where an image name is stored: which registry, and the repository there."""

    private: bool
    repository: str
    tag: str

    def reference(self, registry: LabRegistry) -> str:
        return f"{registry.host(self.private)}/{self.repository}:{self.tag}"


def destination(registry: LabRegistry, text: str) -> Destination:
    """Where the image named ``text`` (as people type it) lives in the lab registry."""
    try:
        name = ImageName.parse(text)
    except ImageNameError as error:
        raise RegistryError(str(error)) from None
    if name.digest or not name.tag:
        raise RegistryError(f"{text}: name the image by a tag, not a digest")
    if name.registry in MIRRORED:
        return Destination(False, name.repository, name.tag)
    if name.registry in (PRIVATE_HOST, registry.host(private=True)):
        return Destination(True, name.path, name.tag)
    if name.registry == registry.host():
        return Destination(False, name.path, name.tag)
    served = ", ".join((*MIRRORED, PRIVATE_HOST, registry.host()))
    raise RegistryError(f"{text}: the lab registry serves {served}, not {name.registry}")


def display_name(registry: LabRegistry, repository: str, private: bool) -> str:
    """The name pods use for a repository of the lab registry."""
    if private:
        return f"{PRIVATE_HOST}/{repository}"
    first = repository.partition("/")[0]
    return repository if first in MIRRORED else f"{registry.host()}/{repository}"


# -- sources ----------------------------------------------------------------------------------


def _oci_name(index: bytes, what: str) -> str | None:
    """The one image of an OCI index, by its ``ref.name`` annotation when that is a full
    name (umoci records only a tag there)."""
    try:
        manifests = json.loads(index)["manifests"]
    except (ValueError, KeyError, TypeError):
        raise RegistryError(f"{what}: not an image: its index.json does not parse") from None
    if not isinstance(manifests, list) or len(manifests) != 1:
        count = len(manifests) if isinstance(manifests, list) else 0
        raise RegistryError(f"{what}: holds {count} images where one was expected")
    annotations = manifests[0].get("annotations") or {}
    ref = annotations.get("org.opencontainers.image.ref.name", "")
    return ref if "/" in ref or ":" in ref else None


def source(path: Path) -> tuple[str, str | None]:
    """skopeo's reference for an image at ``path`` (an OCI layout directory, an OCI archive
    or a docker archive) and the name it records, if any."""
    if not path.exists():
        raise RegistryError(f"{path}: no such file or directory")
    if path.is_dir():
        if not (path / "oci-layout").is_file() or not (path / "index.json").is_file():
            raise RegistryError(
                f"{path}: not an image: a directory without oci-layout and index.json"
            )
        return f"oci:{path}", _oci_name((path / "index.json").read_bytes(), str(path))
    with _open_tar(path) as tar:
        try:
            return _archive(path, tar)
        except (tarfile.TarError, OSError, EOFError) as error:
            raise RegistryError(f"{path}: a corrupt archive: {error}") from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RegistryError(f"{path}: not an image: its manifest does not parse") from None


def _open_tar(path: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(path)
    except tarfile.ReadError:
        raise RegistryError(
            f"{path}: not an image: neither a directory nor a tar archive"
        ) from None
    except (tarfile.TarError, OSError) as error:
        raise RegistryError(f"{path}: cannot be read: {error}") from None


def _archive(path: Path, tar: tarfile.TarFile) -> tuple[str, str | None]:
    """An OCI archive (``oci-layout`` and ``index.json``) or a docker archive
    (``manifest.json``): skopeo's reference and the recorded name."""
    members = {m.name.removeprefix("./"): m for m in tar.getmembers()}

    def read(name: str) -> bytes:
        extracted = tar.extractfile(members[name])
        return extracted.read() if extracted is not None else b""

    if "oci-layout" in members and "index.json" in members:
        return f"oci-archive:{path}", _oci_name(read("index.json"), str(path))
    if "manifest.json" not in members:
        raise RegistryError(f"{path}: not an image: neither an OCI layout nor a docker archive")
    entries = json.loads(read("manifest.json"))
    if len(entries) != 1:
        raise RegistryError(f"{path}: holds {len(entries)} images where one was expected")
    tags = entries[0].get("RepoTags") or []
    return f"docker-archive:{path}", tags[0] if tags else None


# -- pushing and listing ----------------------------------------------------------------------


def push(registry: LabRegistry, reference: str, name: str) -> Destination:
    """Copy the image skopeo knows as ``reference`` into the lab registry as ``name``."""
    where = destination(registry, name)
    creds = ("--dest-creds", f"{PRIVATE_USER}:{password(registry)}") if where.private else ()
    try:
        run(
            "skopeo", "copy", "--quiet", "--dest-tls-verify=false", *creds,
            reference, f"docker://{where.reference(registry)}",
            netns=registry.netns, timeout=PUSH_TIMEOUT,
        )  # fmt: skip
    except CommandError as error:
        lines = [line for line in error.output.splitlines() if line.strip()]
        raise RegistryError(lines[-1] if lines else str(error)) from None
    return where


def _answers(registry: LabRegistry, url: str) -> bool:
    try:
        run("curl", "-sf", "-m", "2", "-o", "/dev/null", url, netns=registry.netns, timeout=5)
    except CommandError:
        return False
    return True


def wait_serving(registry: LabRegistry, seconds: float) -> None:
    """Wait until both registries answer (``up`` waits through their health endpoints)."""
    deadline = time.monotonic() + seconds
    for private in (False, True):
        url = f"{registry.url(private)}/"
        while not _answers(registry, url):
            if time.monotonic() > deadline:
                raise RegistryError(f"the lab registry at {url} did not answer in {seconds:.0f}s")
            time.sleep(1)


def _get(registry: LabRegistry, private: bool, path: str) -> dict[str, object]:
    creds = ("-u", f"{PRIVATE_USER}:{password(registry)}") if private else ()
    url = f"{registry.url(private)}{path}"
    try:
        out = run("curl", "-sfS", "-m", "5", *creds, url, netns=registry.netns, timeout=10)
        document = json.loads(out)
    except (CommandError, ValueError) as error:
        raise RegistryError(f"the lab registry at {url} did not answer: {error}") from None
    return document if isinstance(document, dict) else {}


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def catalog(registry: LabRegistry) -> list[tuple[str, list[str]]]:
    """Every image the lab registry holds: its name as pods use it, and its tags."""
    listed = []
    for private in (False, True):
        repositories = _get(registry, private, f"/v2/_catalog?n={CATALOG_SIZE}")
        for repository in _strings(repositories.get("repositories")):
            answer = _get(registry, private, f"/v2/{urllib.parse.quote(repository)}/tags/list")
            name = display_name(registry, repository, private)
            listed.append((name, sorted(_strings(answer.get("tags")))))
    return sorted(listed)


# -- what up pushes ---------------------------------------------------------------------------


def upstream_version(debian: str) -> str:
    """The upstream part of a Debian version: ``1:1.35.0-4+b1`` → ``1.35.0``."""
    return debian.split(":", 1)[-1].rsplit("-", 1)[0]


def package_version(cache_dir: Path, package: str) -> str | None:
    """The version of ``package`` the images were built from: the newest .deb of it in the
    image cache's apt archives, else the host's installed one (busybox is the host's)."""
    debs = sorted(
        (cache_dir / "apt" / "archives").glob(f"{package}_*.deb"), key=lambda p: p.stat().st_mtime
    )
    if debs:
        version = urllib.parse.unquote(debs[-1].name.split("_")[1])
    else:
        try:
            version = run("dpkg-query", "-W", "-f=${Version}", package).strip()
        except CommandError:
            return None
    return upstream_version(version) or None


def seed_names(recipe: Recipe, version: str | None) -> list[str]:
    """The names ``up`` pushes an image under: its own, ``latest``, and (given the version
    of its package) the version, its major.minor and its major."""
    names = list(recipe.tags)
    repository = ImageName.parse(recipe.tags[0]).repository
    parts = version.split(".") if version else []
    tags = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
    names += [f"{repository}:{tag}" for tag in (*tags, "latest")]
    return list(dict.fromkeys(names))


def seed(registry: LabRegistry, cache_dir: Path) -> None:
    """Push every image the lab builds (built into ``cache_dir`` where missing) under its
    ``seed_plan`` names: the images concurrently, each one's names in turn (after the first,
    a name costs a manifest: the blobs are there)."""
    archives = build_images(cache_dir, ALL_IMAGES)
    recipes = [recipe(name) for name in ALL_IMAGES]
    plan = seed_plan(cache_dir, recipes, dict(zip(ALL_IMAGES, archives, strict=True)))

    def push_all(archive: Path, names: Sequence[str]) -> None:
        for name in names:
            push(registry, f"docker-archive:{archive}", name)

    with ThreadPoolExecutor(len(plan)) as pool:
        for done in [pool.submit(push_all, archive, names) for archive, names in plan]:
            done.result()


def seed_plan(
    cache_dir: Path, recipes: Sequence[Recipe], archives: Mapping[str, Path]
) -> list[tuple[Path, list[str]]]:
    """For each image archive the names it is pushed under (busybox also privately)."""
    plan = []
    for image in recipes:
        package = VERSIONED.get(image.name)
        version = package_version(cache_dir, package) if package else None
        names = seed_names(image, version)
        if image.name == "busybox":
            names += [f"{PRIVATE_SEED}:{tag}" for tag in ("latest", version or "") if tag]
        plan.append((archives[image.name], names))
    return plan
