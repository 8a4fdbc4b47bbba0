# The secrets the VMs share, made on the host before the first VM comes up (and so before the
# source is synced to them): the key workers fetch their credentials with, and the lab
# registry's password.  `vagrant up` runs every machine's trigger at once, in threads of one
# process (and a second `vagrant up` may run beside it), so they are made one at a time, under
# a lock: otherwise two ssh-keygens race for the key, and two passwords for the file.
require "fileutils"
require "securerandom"

SECRETS_MUTEX = Mutex.new

def make_secrets(dir)
  FileUtils.mkdir_p(dir, mode: 0o700)
  SECRETS_MUTEX.synchronize do
    File.open(File.join(dir, ".lock"), File::RDWR | File::CREAT, 0o600) do |lock|
      lock.flock(File::LOCK_EX)
      make_missing_secrets(dir)
    end
  end
end

def make_missing_secrets(dir)
  key = File.join(dir, "join_ed25519")
  unless File.exist?(key)
    system("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kubelab-join", "-f", key) ||
      abort("kubelab: ssh-keygen failed; it makes the key workers join with")
  end
  password = File.join(dir, "registry", "password")
  return if File.exist?(password)

  FileUtils.mkdir_p(File.dirname(password), mode: 0o700)
  File.write(password, "#{SecureRandom.urlsafe_base64(18)}\n", perm: 0o600)
end
