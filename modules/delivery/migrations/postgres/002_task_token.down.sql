DROP TABLE IF EXISTS dlv_task_token;
