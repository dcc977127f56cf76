// Operator alerting. Every rule pages through the one action group.
//
// On the Service Bus namespace (platform metrics: they keep working when the app is down):
//  - an operator alert is waiting in the operator-alerts queue (an order gave up, a poison
//    message, a remote service outage);
//  - any entity has dead-lettered messages (Invariant 6: each leaves its order visible).
// On Application Insights (log search over the app's telemetry; metric names are the app's
// OpenTelemetry instruments, shared/observability/metricNames.ts):
//  - the oldest in-flight order is older than the bound the retry settings allow;
//  - the share of orders ending in Error is above a threshold;
//  - a remote service fails operationally (timeouts, 5xx, no answer) at outage rate;
//  - a request has waited for a call slot of a limited remote service longer than a bound (the
//    service's limit is too low for the load, or it keeps answering 429);
//  - the operator alert's error log line was written (its second channel: it fires for every new
//    give-up even while the queue rule is still firing for an earlier one);
//  - the Supervisor's gauges stopped arriving, so the rules above that read them would be blind.
// The criteria of one rule are ANDed, so each condition is its own rule.
param serviceBusNamespaceName string
param applicationInsightsName string
param location string
param actionGroupName string
param alertNamePrefix string
param operatorAlertsQueue string
param alertEmail string = ''
param tags object

@description('Seconds an order may stay in flight before it is late: (step timeout + claim timeout) x hard threshold, computed in main.bicep from the same parameters as the app settings.')
@minValue(1)
param inFlightAgeBoundSeconds int

@description('Percentage of orders reaching an end state in Error, over 15 minutes, above which the error-rate rule fires.')
@minValue(1)
@maxValue(100)
param errorRatePercent int = 5

@description('Errors needed in the window before the error-rate rule looks at the percentage (a single order in Error out of two is not a trend).')
@minValue(1)
param errorRateMinimumErrors int = 3

@description('Operational failures at one remote service within 5 minutes that raise the service-outage rule (the app setting SERVICE_OUTAGE_ALERT_THRESHOLD).')
@minValue(1)
param serviceOutageThreshold int

@description('Seconds a request may wait for a call slot of a limited remote service (its global call budget) before the call-wait rule fires. Waiting spends no failure budget, so only this rule tells that a limit is too low for the load.')
@minValue(1)
param callWaitAlertSeconds int = 600

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource actionGroup 'Microsoft.Insights/actionGroups@2022-04-01' = {
  name: actionGroupName
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'orderops'
    enabled: true
    emailReceivers: empty(alertEmail)
      ? []
      : [
          {
            name: 'operator'
            emailAddress: alertEmail
            useCommonAlertSchema: true
          }
        ]
  }
}

resource operatorAlertsWaiting 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${alertNamePrefix}-operator-alerts'
  location: 'global'
  tags: tags
  properties: {
    description: 'Messages are waiting in ${operatorAlertsQueue}: an order gave up, a message failed its schema, or a remote service is out. Each message says which and why.'
    severity: 2
    enabled: true
    scopes: [namespace.id]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'ActiveOperatorAlerts'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [operatorAlertsQueue]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

resource deadLettered 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${alertNamePrefix}-dead-lettered'
  location: 'global'
  tags: tags
  properties: {
    description: 'An entity has dead-lettered messages; the dimension names which one.'
    severity: 1
    enabled: true
    scopes: [namespace.id]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadLettered'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          // '*' splits the series per entity, so each queue alerts on its own.
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: ['*']
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

// KQL string literals use double quotes, so the Bicep strings need no escapes. Counters and
// histograms reach Azure Monitor with delta temporality (one row per export interval holding
// the increase), so sum(value) over the window is the count within it; gauges are one row per
// export holding the last observed value.

resource inFlightTooOld 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${alertNamePrefix}-in-flight-age'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Oldest in-flight order is late'
    description: 'The oldest order still in flight is older than ${inFlightAgeBoundSeconds} s, the (step timeout + claim timeout) x hard threshold the retry settings allow. See docs/operations.md, "An order is late".'
    severity: 2
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: join(
            [
              'customMetrics'
              '| where name == "orders.oldest_in_flight_age"'
              '| project timestamp, ageSeconds = value'
            ],
            '\n'
          )
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'ageSeconds'
          operator: 'GreaterThan'
          threshold: inFlightAgeBoundSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

resource errorRate 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${alertNamePrefix}-error-rate'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Orders ending in Error'
    description: 'Over 15 minutes, more than ${errorRatePercent}% of the orders that reached an end state ended in Error (at least ${errorRateMinimumErrors} of them).'
    severity: 1
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: join(
            [
              'customMetrics'
              '| where name == "orders.terminal"'
              '| extend state = tostring(customDimensions["state"])'
              '| summarize terminal = sum(value), errors = sumif(value, state == "Error")'
              '| where errors >= ${errorRateMinimumErrors}'
              '| project errorPercent = 100.0 * errors / terminal'
            ],
            '\n'
          )
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'errorPercent'
          operator: 'GreaterThan'
          threshold: errorRatePercent
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

resource serviceOutage 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${alertNamePrefix}-service-outage'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Remote service failing operationally'
    description: 'A remote service failed at least ${serviceOutageThreshold} calls in 5 minutes for operational reasons (timeout, 5xx, no answer), not business refusals. The alert names the service.'
    severity: 1
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: join(
            [
              'customMetrics'
              '| where name == "remote.failures"'
              '| where tostring(customDimensions["kind"]) == "operational"'
              '| extend service = tostring(customDimensions["service"])'
              '| summarize failures = sum(value) by service'
            ],
            '\n'
          )
          timeAggregation: 'Total'
          metricMeasureColumn: 'failures'
          // One alert per service.
          dimensions: [
            {
              name: 'service'
              operator: 'Include'
              values: ['*']
            }
          ]
          operator: 'GreaterThanOrEqual'
          threshold: serviceOutageThreshold
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

resource callWaitTooLong 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${alertNamePrefix}-call-wait'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Requests waiting long for a remote service'
    description: 'A request has waited more than ${callWaitAlertSeconds} s for a call slot of a limited remote service: its limit is too low for the load, or it keeps answering 429/503. The alert names the service; the console\'s Service limits screen shows the oldest waiting order. See docs/operations.md, "Service limits (screen)".'
    severity: 2
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: join(
            [
              'customMetrics'
              '| where name == "remote.oldest_waiting_age"'
              '| extend service = tostring(customDimensions["service"])'
              '| project timestamp, service, waitSeconds = value'
            ],
            '\n'
          )
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'waitSeconds'
          dimensions: [
            {
              name: 'service'
              operator: 'Include'
              values: ['*']
            }
          ]
          operator: 'GreaterThan'
          threshold: callWaitAlertSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

resource operatorAlertLogged 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${alertNamePrefix}-operator-alert-log'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Operator alert logged'
    description: 'The app wrote its operator alert error line: an order gave up (it compensates and ends in Error). host.json keeps this line out of sampling.'
    severity: 2
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    autoMitigate: false
    criteria: {
      allOf: [
        {
          query: join(
            [
              'traces'
              '| where severityLevel >= 3 and message has "operator alert"'
              '| extend line = parse_json(message)'
              '| where tostring(line.msg) == "operator alert"'
              '| project timestamp, orderId = tostring(line.orderId), code = tostring(line.code)'
            ],
            '\n'
          )
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

resource gaugesSilent 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${alertNamePrefix}-supervisor-silent'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Supervisor gauges missing'
    description: 'No orders.in_flight value arrived for 15 minutes: the Supervisor sweep is not running or its telemetry does not reach Application Insights, so the in-flight-age rule cannot fire.'
    severity: 2
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          // summarize without `by` returns one row even when nothing matched, so silence is 0.
          query: join(
            [
              'customMetrics'
              '| where name == "orders.in_flight"'
              '| summarize reports = count()'
            ],
            '\n'
          )
          timeAggregation: 'Total'
          metricMeasureColumn: 'reports'
          operator: 'LessThan'
          threshold: 1
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [actionGroup.id]
    }
  }
}

output actionGroupId string = actionGroup.id
