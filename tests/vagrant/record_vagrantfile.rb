# Evaluates the Vagrantfile against a stand-in for Vagrant that records what it configures,
# and prints the machines as JSON: how tests check the Vagrantfile without Vagrant or VMs.
#   ruby record_vagrantfile.rb PATH/TO/Vagrantfile [CPUINFO KVM]
# Given CPUINFO and KVM (stand-ins for /proc/cpuinfo and /dev/kvm), it also prints the libvirt
# driver the Vagrantfile's detected_driver picks for them.
require "json"

# Accepts any setting (`x.y = v`, `x.y(v)`, `x.y v do ... end`) and remembers it.
class Recorder
  attr_reader :calls

  def initialize
    @calls = []
    @children = Hash.new { |hash, key| hash[key] = Recorder.new }
  end

  def method_missing(name, *args, **options, &block)
    setting = name.to_s
    if setting.end_with?("=")
      @calls << [setting.chomp("="), args.first]
      return args.first
    end
    return @children[setting] if args.empty? && options.empty? && block.nil?

    settings = Recorder.new
    @calls << [setting, args, options, settings]
    # Configuration blocks are run to record them; a trigger's Ruby action is only recorded.
    block&.call(settings) unless setting == "ruby"
    nil
  end

  def respond_to_missing?(*)
    true
  end

  def child(name)
    @children[name]
  end

  # What was set directly (`x = v`), by name.
  def settings
    @calls.select { |call| call.length == 2 }.to_h
  end

  # The triggers configured (`trigger.before :up do ... end`), with their settings.
  def triggers
    child("trigger").calls.map do |moment, args, _options, settings|
      { moment: moment, actions: args, settings: settings.settings }
    end
  end
end

# The part of Vagrant's configuration object the Vagrantfile uses, recorded per machine.
class MachineRecorder < Recorder
  attr_reader :providers

  def initialize
    super
    @providers = {}
  end

  def vm
    self
  end

  def provider(name)
    settings = Recorder.new
    yield settings
    @providers[name] = settings.settings
  end
end

# Vagrant.configure("2") { |config| ... }, with config.vm.define recording each machine.
class ConfigRecorder < MachineRecorder
  attr_reader :machines

  def initialize
    super
    @machines = {}
  end

  def define(name, **options)
    machine = MachineRecorder.new
    yield machine
    @machines[name] = { options: options, calls: machine.calls, providers: machine.providers,
                        triggers: machine.triggers }
  end

  def trigger
    child("trigger")
  end
end

module Vagrant
  def self.configure(version)
    raise "unexpected configuration version #{version}" unless version == "2"

    $config = ConfigRecorder.new
    yield $config
  end
end

load ARGV.fetch(0)
machines = $config.machines.map do |name, machine|
  calls = machine[:calls]
  network = calls.find { |call| call[0] == "network" }
  provision = calls.find { |call| call[0] == "provision" }
  {
    name: name,
    primary: machine[:options][:primary] || false,
    hostname: calls.find { |call| call[0] == "hostname" }&.last,
    ip: network && network[2][:ip],
    provision: provision && { path: provision[2][:path], args: provision[2][:args] },
    providers: machine[:providers],
    triggers: machine[:triggers]
  }
end
recorded = { box: $config.settings["box"], triggers: $config.triggers, machines: machines }
recorded[:detected_driver] = detected_driver(ARGV[1], ARGV[2]) if ARGV.length == 3
puts JSON.generate(recorded)
