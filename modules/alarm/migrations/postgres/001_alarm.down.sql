DROP TABLE IF EXISTS alarm_audit, alarm_counter, alarm_replay, alarm_storm, alarm_ticket, alarm_silence,
    alarm_notice, alarm_group, alarm_history, alarm_instance, alarm_track, alarm_quarantine, alarm_telemetry,
    alarm_rule, alarm_device;
